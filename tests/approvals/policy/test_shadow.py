"""Shadow rules (issue 40, item 2): saved with `"mode": "shadow"` they decide nothing, count what
they would have done to live calls (allow, deny, ask, and how many that changes), say the same as
the simulator of the same calls, take no use, and promote to live as one policy version."""
import pytest

from approvals.models import Approval, PolicyVersion, Rule, ShadowVerdict
from approvals.policy import simulate
from chat.models import ToolCall
from tests.conftest import ApiClient, intact, only_pending, say, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def rule_body(**fields) -> dict:
    return {"effect": "allow", "tool": "write_file", "scope": "global", "mode": "shadow"} | fields


@pytest.fixture
def approver(bob):
    from approvals.permissions import approvers_group

    bob.groups.add(approvers_group())
    return bob


def made(user, **fields) -> dict:
    response = ApiClient(user).post("rules", rule_body(**fields))
    assert response.status_code == 201, response.content
    assert response.json()["mode"] == fields.get("mode", "shadow")
    return response.json()


def test_a_shadow_allow_decides_nothing_and_counts_the_question_it_would_have_saved(alice, approver, agent):
    rule = made(approver, arguments={"path": "notes/*"})

    conversation = start_conversation(alice, agent, "write hello to notes/a.txt")

    approval = only_pending(conversation)  # still asked: the rule decided nothing
    assert approval.rule_id is None
    (verdict,) = ShadowVerdict.objects.all()
    assert (verdict.rule_id, verdict.tool_call_id, verdict.outcome, verdict.happened, verdict.changed) == (
        rule["id"], approval.tool_call_id, "allow", "asked", True,
    )
    body = ApiClient(approver).get(f"rules/{rule['id']}").json()
    assert body["would_have"] == {"allow": 1, "deny": 0, "ask": 0, "changed": 1}
    assert body["uses"] == 0 and Rule.objects.get(pk=rule["id"]).uses == 0  # it took no use


def test_shadow_deny_and_ask_rules_count_calls_that_ran(alice, approver, agent):
    deny = made(approver, effect="deny", tool="read_file")
    ask = made(approver, effect="ask", tool="list_directory")
    conversation = start_conversation(alice, agent, "read notes.txt")
    say(conversation, alice, "list files")

    assert not Approval.objects.filter(conversation=conversation).exists()  # both ran, as the policy says
    assert ApiClient(approver).get(f"rules/{deny['id']}").json()["would_have"] == {"allow": 0, "deny": 1, "ask": 0, "changed": 1}
    assert ApiClient(approver).get(f"rules/{ask['id']}").json()["would_have"] == {"allow": 0, "deny": 0, "ask": 1, "changed": 1}


def test_a_shadow_allow_never_counts_what_a_person_must_decide(alice, approver, agent):
    critical = made(approver, tool="delete_all_files")
    agent.owner_max_risk = "low"  # four eyes on alice's writes
    agent.save()
    four_eyes = made(approver)
    start_conversation(alice, agent, "delete all files")
    start_conversation(alice, agent, "write hello to notes.txt")

    assert ApiClient(approver).get(f"rules/{critical['id']}").json()["would_have"]["allow"] == 0
    assert ApiClient(approver).get(f"rules/{four_eyes['id']}").json()["would_have"]["allow"] == 0


def test_a_shadow_ask_over_a_call_a_person_was_asked_about_changes_nothing(alice, approver, agent):
    rule = made(approver, effect="ask")
    start_conversation(alice, agent, "write hello to notes.txt")
    assert ApiClient(approver).get(f"rules/{rule['id']}").json()["would_have"] == {"allow": 0, "deny": 0, "ask": 1, "changed": 0}


def test_the_shadows_counts_match_the_simulator_over_the_same_calls(alice, approver, agent):
    shapes = [
        {"effect": "allow", "tool": "write_file", "arguments": {"path": "notes/*"}},
        {"effect": "deny", "tool": "*_file", "arguments": {}},
        {"effect": "ask", "tool": "*", "arguments": {}},
    ]
    shadows = [made(approver, **shape) for shape in shapes]
    for text in ("write a to notes/a.txt", "write b to other.txt", "read notes/a.txt", "list files", "delete other.txt",
                 "write c to notes/c.txt", "calculate 2+2"):
        start_conversation(alice, agent, text)

    for shape, rule in zip(shapes, shadows):
        counted = ApiClient(approver).get(f"rules/{rule['id']}").json()["would_have"]
        replayed = simulate.simulate_for(approver, scope="global", days=1, **shape)
        assert (counted["allow"], counted["deny"], counted["ask"]) == (replayed.would_allow, replayed.would_deny, replayed.would_ask), shape
        assert sum(counted[k] for k in ("allow", "deny", "ask")) > 0, shape


def test_promoting_makes_it_live_as_one_policy_version_and_it_decides_the_next_call(alice, approver, agent):
    rule = made(approver, arguments={"path": "notes/*"})
    start_conversation(alice, agent, "write hello to notes/a.txt")
    versions = PolicyVersion.objects.count()

    response = ApiClient(approver).post(f"rules/{rule['id']}/promote")

    assert response.status_code == 200, response.content
    assert response.json()["mode"] == "live" and response.json()["would_have"]["allow"] == 1
    (version,) = PolicyVersion.objects.all()[: PolicyVersion.objects.count() - versions]
    assert version.created_by == approver
    assert {"model": "approvals.rule", "action": "changed"}.items() <= version.changes[0].items()
    assert version.changes[0]["fields"]["mode"] == ["shadow", "live"]
    assert intact().startswith("audit chain intact")

    conversation = start_conversation(alice, agent, "write again to notes/b.txt")
    call = ToolCall.objects.select_related("approval").get(message__conversation=conversation)
    assert (call.approval.decided_via, call.approval.rule_id, call.status) == ("rule", rule["id"], "succeeded")

    again = ApiClient(approver).post(f"rules/{rule['id']}/promote")
    assert again.status_code == 409 and again.json()["detail"] == f"Rule #{rule['id']} is already live."


def test_who_may_promote_is_who_may_change_the_rule(alice, approver, agent, mallory):
    rule = made(approver)
    assert ApiClient(alice).post(f"rules/{rule['id']}/promote").status_code == 404  # not hers to see
    assert ApiClient(approver, scope="ask").post(f"rules/{rule['id']}/promote").status_code == 403
    assert ApiClient(None).post(f"rules/{rule['id']}/promote").status_code == 401
    assert Rule.objects.get(pk=rule["id"]).mode == "shadow"
    bad = ApiClient(approver).post("rules", rule_body(mode="dry-run"))
    assert bad.status_code == 422


def test_a_shadow_rule_is_exported_as_such_and_a_live_one_as_before(approver):
    from approvals.policy.versions import rule_entry

    shadow = Rule.objects.create(effect="allow", tool="x", scope="global", created_by=approver, mode="shadow")
    live = Rule.objects.create(effect="allow", tool="x", scope="global", created_by=approver)
    assert rule_entry(shadow)["mode"] == "shadow" and "mode" not in rule_entry(live)


def test_the_rules_page_shows_what_a_shadow_rule_would_have_changed_and_promotes_it(alice, approver, agent):
    from django.test.utils import CaptureQueriesContext
    from django.db import connection

    from tests.conftest import client_for

    rule = made(approver, arguments={"path": "notes/*"})
    conversation = start_conversation(alice, agent, "write hello to notes/a.txt")
    page = client_for(approver)

    html = page.get("/rules/").content.decode()
    assert "◌ shadow" in html and "Would have:</strong> 1 allowed · 0 denied · 0 asked" in html
    assert "1 call decided otherwise" in html
    call = ToolCall.objects.get(message__conversation=conversation)
    assert f"/conversations/{conversation.pk}/#tool-call-{call.pk}" in html and "a person was asked; it would have allowed it." in html
    with CaptureQueriesContext(connection) as few:
        page.get("/rules/")
    made(approver, effect="deny", tool="read_file")
    made(approver, effect="ask", tool="list_directory")
    with CaptureQueriesContext(connection) as more:
        page.get("/rules/")
    assert len(more) == len(few)  # the counts of every rule in two queries

    response = page.post(f"/rules/{rule['id']}/promote/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "Promote to live" not in response.content.decode().split("</tr>")[0]
    assert f"Rule #{rule['id']} is live" in response.content.decode()
    assert Rule.objects.get(pk=rule["id"]).mode == "live"
    assert page.post(f"/rules/{rule['id']}/promote/").status_code == 409
    assert client_for(alice).post(f"/rules/{rule['id']}/promote/").status_code == 404
