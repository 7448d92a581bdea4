"""What a timeout does, per agent and tool (issue 39, item 10; kagent's "auto-reject or
auto-approve, configurable", the Swift design's defaultTimeout): expire (the default), reject with
a stated reason the model reads, or approve, which only a low-risk call any one person could
approve may do: refused by validation for a riskier tool, and checked again when the call is asked
and when its deadline comes. The outcome and its cause are in the audit."""
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from approvals import audit
from approvals.announcements.outcomes import outcome_line
from approvals.models import Approval, Route
from approvals.policy import timeouts
from approvals.services import decide_many, expire_overdue
from approvals.summary import summarize
from chat.history import REJECTION_NUDGE
from chat.models import Conversation, ToolCall
from chat.scripted import SCRIPTED_REQUESTS
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def configured(agent, *, action: str = "expire", per_tool: dict | None = None, timeout: int = 600, gate_reads: bool = False):
    agent.approval_timeout_seconds = timeout
    agent.timeout_action = action
    agent.timeout_actions = per_tool or {}
    if gate_reads:
        agent.require_approval = [*agent.require_approval, "read_file"]
    agent.save()
    return agent


def past_deadline(approval: Approval) -> list[int]:
    return expire_overdue(now=approval.expires_at + timedelta(seconds=1))


def test_by_default_a_deadline_expires_the_call_and_nothing_runs(alice, agent):
    [approval] = pending_approvals(start(alice, configured(agent), "write hi to a.txt"))
    assert approval.timeout_action == "expire" and not approval.explanation[-1]["step"] == "timeout"

    assert past_deadline(approval) == [approval.pk]

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("expired", "timeout")
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.EXPIRED


def test_reject_at_the_deadline_tells_the_model_why_and_chains_the_cause(alice, agent, settings):
    conversation = start(alice, configured(agent, per_tool={"write_file": "reject"}), "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.timeout_action == "reject"
    assert approval.explanation[-1] == {
        "step": "timeout", "outcome": "rejects",
        "detail": "If no one decides by its deadline, it is rejected, and the model is told why.",
    }
    SCRIPTED_REQUESTS.clear()

    assert past_deadline(approval) == [approval.pk]

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("rejected", "timeout", None)
    assert approval.rejection_reason == (
        f"No one decided by its deadline ({approval.expires_at:%H:%M} UTC), and Demo agent rejects write_file calls "
        "that no one decides in time."
    )
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.REJECTED
    assert not (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "a.txt").exists()
    told = [m["content"] for m in SCRIPTED_REQUESTS[-1]["messages"] if m["role"] == "tool"]
    assert told == [f"Rejected by the system: {approval.rejection_reason}{REJECTION_NUDGE}"]
    assert audit.verify().is_intact  # the reason is part of the decision's hashed link
    assert outcome_line(approval).startswith("❌ Rejected at its deadline, as its agent's timeout setting says at ")
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.IDLE


def test_approve_at_the_deadline_runs_a_low_risk_call(alice, agent, settings):
    (settings.HITL_SANDBOX_ROOT).mkdir(parents=True, exist_ok=True)
    conversation = start(alice, configured(agent, per_tool={"read_file": "approve"}, gate_reads=True), "read notes.txt")
    [approval] = pending_approvals(conversation)
    assert (approval.risk, approval.timeout_action) == ("low", "approve")
    assert approval.explanation[-1]["outcome"] == "approves"

    assert past_deadline(approval) == [approval.pk]

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "timeout", None)
    assert approval.comment == (
        f"No one decided by its deadline ({approval.expires_at:%H:%M} UTC), and Demo agent approves low-risk read_file "
        "calls that no one decides in time."
    )
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.FAILED and "No file named 'notes.txt'" in call.error  # it ran
    assert audit.verify().is_intact


@pytest.mark.parametrize("text, why", [
    ("write hi to a.txt", "it is medium risk, and only a low-risk call is approved at its deadline"),
    ("delete a.txt", "it is high risk, and only a low-risk call is approved at its deadline"),
])
def test_an_agent_wide_approve_never_approves_a_riskier_call_it_expires(alice, agent, text, why):
    # Saved without validation (an older row, a script): the request checks again.
    conversation = start(alice, configured(agent, action="approve"), text)
    [approval] = pending_approvals(conversation)
    assert approval.timeout_action == "expire"
    assert approval.explanation[-1] == {
        "step": "timeout", "outcome": "expires",
        "detail": f"Its agent approves such calls at their deadline, but {why}: it expires instead.",
    }
    past_deadline(approval)
    approval.refresh_from_db()
    assert approval.status == "expired"


def test_a_routed_call_is_never_approved_at_its_deadline(alice, agent):
    configured(agent, per_tool={"read_file": "approve"}, gate_reads=True)
    Route.objects.create(agent=agent, tool="read_file", min_risk="low")
    [approval] = pending_approvals(start(alice, agent, "read notes.txt"))

    assert approval.timeout_action == "expire"
    assert "a route names who approves it" in approval.explanation[-1]["detail"]
    past_deadline(approval)
    approval.refresh_from_db()
    assert approval.status == "expired"


def test_what_a_deadline_may_not_approve_says_why():
    def why(**pause):
        return timeouts.why_not_approve(**{"kind": "action", "risk": "low", "approver_required": False, "routed": False, **pause})

    assert why() == ""
    assert why(approver_required=True) == "it needs an approver other than its requester (four eyes)"
    assert why(quorum=2) == "a route names who approves it"
    assert why(kind="question") == "a question is a person's to answer"
    assert why(kind="plan") == "a plan is a person's to answer"
    assert why(risk="critical") == "it is critical risk, and only a low-risk call is approved at its deadline"
    assert why(confirmation=True) == "it needs a typed confirmation"
    assert why(step_up=True) == "approving it takes a passkey"


def test_an_approve_checked_again_at_the_deadline_expires_what_an_edit_made_riskier(alice, agent):
    conversation = start(alice, configured(agent, per_tool={"read_file": "approve"}, gate_reads=True), "read notes.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(risk="medium")  # as an edit re-gated it
    approval.refresh_from_db()

    past_deadline(approval)

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("expired", "timeout")


def test_a_bulk_decision_after_the_deadline_applies_each_ones_timeout_action(alice, agent):
    conversation = start(alice, configured(agent, per_tool={"write_file": "reject"}), "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    decide_many({approval.pk: approval.shown_hash}, user=alice, approve=True, via="api")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("rejected", "timeout")  # not approved late
    assert "rejects write_file calls" in approval.rejection_reason


def test_the_card_and_the_channels_say_what_the_deadline_does(alice, agent):
    conversation = start(alice, configured(agent, per_tool={"write_file": "reject"}), "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert "Rejected at <time" in page and "if no one decides." in page and "Expires at <time" not in page
    summary = summarize(approval)
    assert (summary.at_deadline, summary.unless) == ("Rejected", " if no one decides")
    api = client_for(alice).get(f"/api/approvals/{approval.pk}").json()
    assert api["timeout_action"] == "reject"

    past_deadline(approval)
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "⊘ Rejected at its deadline, by the agent’s timeout setting" in page
    assert "rejects write_file calls that no one decides in time." in page


# --- Validation ------------------------------------------------------------------------------


def test_validation_refuses_approve_for_a_riskier_tool_and_for_an_agent_with_riskier_tools(agent):
    agent.timeout_actions = {"write_file": "approve"}
    with pytest.raises(ValidationError) as refused:
        agent.full_clean()
    assert refused.value.message_dict["timeout_actions"] == [
        "write_file is medium risk: only a low-risk tool may be approved at its deadline."
    ]

    agent.timeout_actions = {}
    agent.timeout_action = "approve"
    with pytest.raises(ValidationError) as refused:
        agent.full_clean()
    [message] = refused.value.message_dict["timeout_action"]
    assert message.startswith("Approving at the deadline is for low-risk calls only, and ") and "delete_file" in message

    agent.timeout_action = "reject"
    agent.timeout_actions = {"read_file": "approve", "write_file": "reject"}
    agent.full_clean()  # a low-risk tool may be approved; any tool may be rejected


@pytest.mark.parametrize("bad", [["read_file"], {"read_file": "yes"}, {"": "reject"}])
def test_validation_refuses_a_malformed_per_tool_setting(agent, bad):
    agent.timeout_actions = bad
    with pytest.raises(ValidationError) as refused:
        agent.full_clean()
    assert "timeout_actions" in refused.value.message_dict


def test_the_admin_form_offers_both_settings(agent, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.test", "pw")
    client = client_for(admin)
    page = client.get(f"/admin/chat/agent/{agent.pk}/change/")
    assert page.status_code == 200
    assert 'name="timeout_action"' in page.content.decode() and 'name="timeout_actions"' in page.content.decode()


def test_every_channel_warns_with_what_the_deadline_does(alice, agent):
    from emaillink import texts as email_texts
    from slacklink import blocks
    from telegramlink import texts as telegram_texts

    conversation = start(alice, configured(agent, per_tool={"write_file": "reject"}), "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    at = f"{approval.expires_at:%H:%M} UTC"
    soon = approval.expires_at - timedelta(minutes=3)

    assert f"Rejected at {at} (in 3 min) if no one decides" in telegram_texts.warning(approval, now=soon)
    assert blocks.expires_in(approval, now=soon) == f"Rejected at {at} (in 3 min) if no one decides"
    assert email_texts.warning_subject(summarize(approval)).startswith(f"Rejected at {at} if no one decides: Write")

    Approval.objects.filter(pk=approval.pk).update(timeout_action="expire")
    approval.refresh_from_db()
    assert blocks.expires_in(approval, now=soon) == f"Expires at {at} (in 3 min)"
