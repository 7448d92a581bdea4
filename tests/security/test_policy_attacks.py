"""Issue 28's policy features attacked as an outsider would: rules made where the maker has no say,
step-up dodged, the simulator and explanations read beyond what one may see."""
import pytest
from django.contrib.auth.models import Group, User

from approvals.models import Approval, Rule
from approvals.deciders.routemaking import create_route
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def dana(db):
    """A member of the finance group a route names: an approver of routed calls only."""
    user = User.objects.create_user("dana", password="dana-password")
    user.groups.add(Group.objects.get_or_create(name="finance")[0])
    return User.objects.get(pk=user.pk)


@pytest.fixture
def routed(alice, agent, dana):
    """alice's conversation holding a call routed to finance, which dana may therefore see."""
    create_route(created_by=None, agent=agent.slug, tool="delete_file", approvers=["finance"], quorum=1)
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    assert approval.route_id is not None
    return approval


@pytest.mark.parametrize("effect", ["allow", "ask", "deny"])
def test_a_route_member_makes_no_rule_in_the_conversation_of_someone_whose_call_was_routed_to_them(
    alice, dana, routed, api_as, effect
):
    made = api_as(dana).post("rules", {
        "effect": effect, "tool": "write_file", "arguments": {}, "scope": "conversation", "conversation_id": str(routed.conversation_id),
    })
    simulated = api_as(dana).post("rules/simulate", {
        "effect": effect, "tool": "*", "arguments": {}, "scope": "conversation", "conversation_id": str(routed.conversation_id),
    })

    assert made.status_code in (403, 404), made.content
    assert simulated.status_code in (403, 404), simulated.content
    assert not Rule.objects.exists()


def test_the_owner_still_makes_rules_in_their_own_conversation(alice, routed, api_as):
    made = api_as(alice).post("rules", {
        "effect": "ask", "tool": "write_file", "arguments": {}, "scope": "conversation", "conversation_id": str(routed.conversation_id),
    })
    assert made.status_code == 201, made.content


# --- Step-up ---------------------------------------------------------------------------------------


@pytest.fixture
def strict_critical(alice, agent):
    """alice's pending `delete all files` (critical), her agent asking a passkey from critical up."""
    agent.step_up_from_risk = "critical"
    agent.save(update_fields=["step_up_from_risk"])
    [approval] = pending_approvals(start(alice, agent, "delete all files"))
    assert approval.risk == "critical"
    return approval


def test_a_session_cannot_pile_up_passkey_challenges(alice, strict_critical):
    from stepup.ceremony import MAX_OPEN_CHALLENGES
    from stepup.models import Challenge
    from tests.conftest import client_for
    from tests.standins.soft_passkey import SoftPasskey
    from tests.stepup.test_stepup import options_for, register

    client = client_for(alice)
    assert register(client, "alice-password", SoftPasskey()).status_code == 201
    answers = [options_for(client, strict_critical).status_code for _ in range(MAX_OPEN_CHALLENGES + 5)]

    assert answers.count(400) >= 5 and Challenge.objects.filter(user=alice).count() <= MAX_OPEN_CHALLENGES
    assert Approval.objects.get(pk=strict_critical.pk).status == "pending"


def test_a_vote_toward_a_quorum_needs_each_voters_passkey(alice, bob, agent, api_as):
    """Two approvers are needed; neither's vote counts without their own proof, by any surface."""
    from approvals.services import StepUp, StepUpRequired, decide
    from approvals.models import Vote

    agent.step_up_from_risk = "high"
    agent.save(update_fields=["step_up_from_risk"])
    Group.objects.get_or_create(name="finance")
    carol = User.objects.create_user("carol", password="carol-password")
    carol.groups.add(Group.objects.get(name="finance"))
    bob.groups.add(Group.objects.get(name="finance"))
    create_route(created_by=None, agent=agent.slug, tool="*", min_risk="high", approvers=["finance"], quorum=2)
    [approval] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))
    assert (approval.quorum, approval.risk) == (2, "high")

    api = api_as(bob).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash})
    bulk = api_as(bob).post("approvals/decisions", {"decision": "approve", "ids": [approval.pk]})
    bobs = StepUp(approval_id=approval.pk, shown_hash=approval.shown_hash, user_id=bob.pk, credential_id="bob-key")
    with pytest.raises(StepUpRequired):  # bob's proof is not carol's
        decide(approval.pk, user=User.objects.get(pk=carol.pk), approve=True, via="chat", shown_hash=approval.shown_hash, step_up=bobs)

    assert api.status_code == 403, api.content
    assert bulk.status_code in (200, 207, 400, 403) and not Vote.objects.exists()
    assert Approval.objects.get(pk=approval.pk).status == "pending"


# --- import_policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize("patterns", ['["' + "a?" * 150 + '"]', '["  "]', '{"": ["sudo *"]}'])
def test_import_policy_checks_always_ask_patterns_as_the_agent_admin_does(agent, tmp_path, patterns):
    """1 to 200 characters each, under a tool name: a pattern of thousands of wildcards costs time on
    every call of the tool, and a blank one silently asks nothing."""
    from django.core.management import call_command
    from django.core.management.base import CommandError
    from io import StringIO

    value = patterns if patterns.startswith("{") else "{write_file: " + patterns + "}"
    path = tmp_path / "policy.yaml"
    path.write_text(f"agents:\n  - slug: {agent.slug}\n    always_ask: {value}\n")

    with pytest.raises(CommandError, match="always_ask"):
        call_command("import_policy", str(path), "--apply", stdout=StringIO(), stderr=StringIO())

    agent.refresh_from_db()
    assert not agent.always_ask


# --- Freshness -------------------------------------------------------------------------------------


def test_an_approval_is_fresh_up_to_its_last_second_and_lapsed_just_after(alice, agent):
    from datetime import timedelta
    from types import SimpleNamespace

    from chat import freshness

    agent.approval_valid_seconds = 60
    decided = SimpleNamespace(decided_at=__import__("django.utils.timezone", fromlist=["now"]).now())
    edge = decided.decided_at + timedelta(seconds=60)

    assert freshness.lapsed_result(decided, agent, now=edge) == ""
    assert freshness.lapsed_result(decided, agent, now=edge + timedelta(microseconds=1)).startswith("Not run")


def test_a_worker_holding_a_stale_copy_never_runs_a_call_another_worker_lapsed(alice, agent, monkeypatch, settings):
    """Two workers race: one lapses the call; the other, which read it as approved a moment before
    (and whose clock says the approval is still fresh), loses the claim and runs nothing."""
    from datetime import timedelta
    from pathlib import Path
    from types import SimpleNamespace

    from django.utils import timezone

    from approvals.services import decide
    from chat import freshness, loop, receivers
    from chat.models import ToolCall

    agent.approval_valid_seconds = 60
    agent.save()
    conversation = start(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    monkeypatch.setattr(receivers.advance_conversation, "delay", lambda conversation_id: None)  # workers down
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    stale = ToolCall.objects.select_related("approval", "message__conversation__agent").get(pk=approval.tool_call_id)
    _ = stale.approval.decided_at
    real = timezone.now
    monkeypatch.setattr(freshness, "timezone", SimpleNamespace(now=lambda: real() + timedelta(seconds=61)))
    loop.advance(conversation.pk)  # the first worker: lapsed
    monkeypatch.setattr(freshness, "timezone", SimpleNamespace(now=real))  # the second still thinks it fresh

    loop.settle_call(stale, stale.message.conversation)

    assert ToolCall.objects.get(pk=stale.pk).status == ToolCall.Status.LAPSED
    assert not (Path(settings.HITL_SANDBOX_ROOT) / str(conversation.pk) / "notes/a.txt").exists()
