"""Issue 40's new surfaces, attacked as an outsider would: the agents' reviewer settings, rules with
memory, shadow promotion and undo, with bad input, someone else's ids and tokens that may only ask.
Each answer is a clear 4xx, nothing is changed, never a 500."""
import pytest

from approvals.models import Rule
from chat.models import Agent, ToolCall
from tests.conftest import ApiClient, only_pending, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(bob):
    from django.contrib.auth.models import Permission

    from approvals.permissions import approvers_group

    bob.groups.add(approvers_group())
    bob.user_permissions.add(Permission.objects.get(codename="change_agent"))
    return bob


@pytest.mark.parametrize("body, status", [
    ({"reviewer_model": "scripted/reviewer\u0000"}, 400),
    ({"reviewer_api_base": "x" * 301}, 422),
    ({"reviewer_max_risk": "critical"}, 422),
    ({"owner_max_risk": "low"}, 422),  # only the reviewer's settings change here
    ([], 422),
])
def test_bad_reviewer_settings_change_nothing(operator, agent, body, status):
    before = Agent.objects.filter(pk=agent.pk).values().get()
    response = ApiClient(operator).patch(f"agents/{agent.slug}", body)
    assert response.status_code == status, response.content
    assert Agent.objects.filter(pk=agent.pk).values().get() == before


def test_a_lone_surrogate_in_the_settings_is_refused(operator, agent):
    response = ApiClient(operator).client.patch(
        f"/api/agents/{agent.slug}", '{"reviewer_model": "\\ud800"}', content_type="application/json", headers=ApiClient(operator).headers
    )
    assert response.status_code == 400


@pytest.mark.parametrize("memory", [
    {"after": {"tool": "x", "within_seconds": 60, "same": ["a"] * 11}},
    {"after": {"tool": "x\u0000", "within_seconds": 60}},
    {"after": {"tool": "x", "within_seconds": 10**12}},
    {"at_most": {"count": 10**12, "within_seconds": 60}},
    {"at_most": {"count": 1, "within_seconds": 60, "extra": 1}},
    {"after": "fraud_check"},
])
def test_memory_that_says_nothing_valid_is_a_400_and_no_rule(operator, memory):
    response = ApiClient(operator).post("rules", {"effect": "allow", "tool": "write_file", "scope": "global", **memory})
    assert response.status_code in (400, 422), response.content
    assert not Rule.objects.exists()


def test_promote_and_undo_refuse_others_ids_and_ask_only_tokens(alice, operator, mallory, agent):
    shadow = Rule.objects.create(effect="allow", tool="write_file", scope="global", created_by=operator, mode="shadow")
    conversation = start_conversation(alice, agent, "write one to notes.txt")
    approval = only_pending(conversation)
    ApiClient(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash})
    call = ToolCall.objects.get(message__conversation=conversation)

    assert ApiClient(mallory).post(f"rules/{shadow.pk}/promote").status_code == 404
    assert ApiClient(mallory).post(f"tool-calls/{call.pk}/undo").status_code == 404  # as for an id that does not exist
    assert ApiClient(mallory).post("tool-calls/987654/undo").status_code == 404
    assert ApiClient(alice).post(f"tool-calls/{2**63}/undo").status_code == 422
    assert ApiClient(alice, scope="ask").post(f"tool-calls/{call.pk}/undo").status_code == 403
    assert ApiClient(operator, scope="ask").post(f"rules/{shadow.pk}/promote").status_code == 403
    assert ApiClient(operator, scope="ask").patch(f"agents/{agent.slug}", {"reviewer_model": "scripted/reviewer"}).status_code == 403
    shadow.refresh_from_db()
    assert shadow.mode == "shadow" and not call.undos.exists()
