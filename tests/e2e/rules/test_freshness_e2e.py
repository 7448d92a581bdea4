"""Approval freshness and time-boxed grants on the real stack (issue 28, items 5 and 6).

A call approved while the worker was stopped, for longer than its agent's approval_valid_seconds,
lapses when a worker comes back: it never runs, the model is told, and the same call asked again is
approved afresh. (The worker is stopped and started as tests/e2e/faults/test_crashes.py does, on a stack of
its own.) A grant made with the decision (the API's `remember.expires_at`, as the card's "Approve
for 10 minutes" makes one) lets identical calls in that conversation run unasked until it expires;
then they ask again."""
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from approvals.models import Approval, Rule
from chat.models import Conversation, Message, ToolCall
from tests.conftest import wait_until
from tests.e2e.conftest import Api, status_of
from tests.e2e.faults.test_crashes import RECOVERY_SECONDS, crash, crash_stack  # noqa: F401  (fixtures: a worker to stop)

pytestmark = pytest.mark.e2e
WINDOW_SECONDS = 2


def replies(conversation_id) -> list[str]:
    return list(Message.objects.filter(conversation_id=conversation_id, role="assistant").order_by("position").values_list("content", flat=True))


def pending_one(conversation_id) -> Approval:
    wait_until(lambda: status_of(conversation_id) == Conversation.Status.WAITING_FOR_APPROVAL, timeout=RECOVERY_SECONDS, message="waiting")
    return Approval.objects.get(conversation_id=conversation_id, status=Approval.Status.PENDING)


def test_a_call_approved_while_the_worker_was_stopped_past_the_window_lapses_and_never_runs(crash, alice, agent):  # noqa: F811
    agent.approval_valid_seconds = WINDOW_SECONDS
    agent.save()
    api = Api(crash.base_url, alice)
    made = api.post("conversations", {"agent": "demo", "message": "write hi to notes/a.txt"})
    assert made.status_code == 201, made.text
    conversation_id = made.json()["id"]
    approval = pending_one(conversation_id)

    crash.worker.stop()  # workers down: the decision is stored, nobody runs the call
    assert api.post(f"approvals/{approval.pk}/decision", {"decision": "approve"}).status_code == 200
    approval.refresh_from_db()
    wait_until(lambda: timezone.now() > approval.decided_at + timedelta(seconds=WINDOW_SECONDS + 0.5), timeout=10,
               message="the approval's window to pass")
    assert ToolCall.objects.get(pk=approval.tool_call_id).status in ("pending_approval", "approved")  # not run yet
    crash.start_worker()

    wait_until(lambda: status_of(conversation_id) == Conversation.Status.IDLE, timeout=RECOVERY_SECONDS, message="the loop to go on")
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert (call.status, call.started_at) == (ToolCall.Status.LAPSED, None)
    assert call.result.startswith("Not run: the approval lapsed before it could run (approved at ")
    assert f"valid for {WINDOW_SECONDS} s). Ask again if it should still be done." in call.result
    sandbox = Path(crash.env.get("HITL_SANDBOX_ROOT", "")) / conversation_id
    assert not (sandbox / "notes" / "a.txt").exists()
    assert replies(conversation_id)[-1].startswith("I did not write") and "lapsed" in replies(conversation_id)[-1]
    assert api.get(f"conversations/{conversation_id}").json()["messages"][1]["tool_calls"][0]["status"] == "lapsed"

    # Asked again, approved again with the worker up: it runs.
    assert api.post(f"conversations/{conversation_id}/messages", {"content": "write hi to notes/a.txt"}).status_code == 202
    again = pending_one(conversation_id)
    assert api.post(f"approvals/{again.pk}/decision", {"decision": "approve"}).status_code == 200
    wait_until(lambda: ToolCall.objects.get(pk=again.tool_call_id).status == ToolCall.Status.SUCCEEDED, timeout=RECOVERY_SECONDS,
               message="the call approved afresh to run")
    assert (sandbox / "notes" / "a.txt").read_text() == "hi"


GRANT_SECONDS = 15  # long enough for a turn on a loaded machine, short enough to wait out


def test_a_time_boxed_grant_approves_identical_calls_until_it_expires_then_they_ask_again(e2e, api_for, alice, agent):
    api = api_for(alice)
    made = api.post("conversations", {"agent": "demo", "message": "write hi to notes/a.txt"})
    conversation_id = made.json()["id"]
    approval = pending_one(conversation_id)
    expires_at = timezone.now() + timedelta(seconds=GRANT_SECONDS)
    decided = api.post(f"approvals/{approval.pk}/decision", {
        "decision": "approve", "shown_hash": approval.shown_hash,
        "remember": {"scope": "conversation", "expires_at": expires_at.isoformat()},
    })
    assert decided.status_code == 200, decided.text
    rule = Rule.objects.get(conversation_id=conversation_id)
    assert (rule.effect, rule.arguments, rule.expires_at) == ("allow", {"path": "notes/*"}, expires_at)
    wait_until(lambda: status_of(conversation_id) == Conversation.Status.IDLE, timeout=30, message="the first call to run")

    assert api.post(f"conversations/{conversation_id}/messages", {"content": "write ho to notes/a.txt"}).status_code == 202
    wait_until(lambda: Approval.objects.filter(conversation_id=conversation_id).count() == 2, timeout=30, message="the second call")
    second = Approval.objects.filter(conversation_id=conversation_id).order_by("pk").last()
    assert (second.status, second.decided_via, second.rule_id) == ("approved", "rule", rule.pk)
    wait_until(lambda: status_of(conversation_id) == Conversation.Status.IDLE, timeout=30, message="the second call to run")
    assert timezone.now() < expires_at, "the machine was too slow to see the grant before it expired"

    wait_until(lambda: timezone.now() > expires_at, timeout=GRANT_SECONDS + 5, message="the grant to expire")
    assert api.post(f"conversations/{conversation_id}/messages", {"content": "write hi to notes/a.txt"}).status_code == 202
    third = pending_one(conversation_id)
    assert third.rule_id is None
    listed = {item["id"]: item for item in api.get("rules").json()["items"]}
    assert listed[rule.pk]["expires_at"] is not None
