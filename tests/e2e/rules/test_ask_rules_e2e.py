"""An ask rule end to end (issue 28), through the real parts: the rules API and the approvals API on
daphne, the loop in a Celery worker process, Redis, the scripted model. `read_file` runs without a
human by the agent's policy; an ask rule on `read_file secrets/*` makes such a read wait, be
approved, and only then run. Asserted on stored state."""
import pytest

from approvals.models import Approval, Rule
from chat.models import Conversation, Message, ToolCall
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e


def status_is(conversation_id: str, status: str) -> Conversation:
    return wait_until(
        lambda: Conversation.objects.filter(pk=conversation_id, status=status).first(),
        timeout=20,
        message=f"conversation {conversation_id} to be {status}",
    )


def test_an_ask_rule_on_read_file_secrets_makes_the_read_wait_then_run_once_approved(e2e, api_for, alice, agent):
    api = api_for(alice)
    made = api.post("rules", {"effect": "ask", "tool": "read_file", "arguments": {"path": "secrets/*"}, "scope": "agent_user", "agent": "demo"})
    assert made.status_code == 201, made.text
    ask = Rule.objects.get(pk=made.json()["id"])

    started = api.post("conversations", {"agent": "demo", "message": "read secrets/key.txt"})
    assert started.status_code == 201, started.text
    conversation_id = started.json()["id"]
    status_is(conversation_id, "waiting_for_approval")

    call = ToolCall.objects.select_related("approval").get(message__conversation_id=conversation_id)
    approval = call.approval
    assert (call.status, call.is_gated, approval.status, approval.rule_id) == ("pending_approval", True, "pending", ask.pk)
    listed = api.get(f"approvals/{approval.pk}").json()
    assert (listed["status"], listed["rule_id"]) == ("pending", ask.pk)
    steps = api.get(f"approvals/{approval.pk}/explain").json()["steps"]
    assert steps[0]["step"] == "gate" and steps[0]["outcome"] == "runs without a human"
    assert any(step["step"].startswith(f"rule #{ask.pk} ") and step["outcome"] == "applied" for step in steps)
    assert steps[-1] == {"step": "outcome", "outcome": "waits for a human", "detail": f"Asked because of rule #{ask.pk}."}

    # The file appears only now: had the read run before the approval, it would have failed.
    folder = e2e.sandbox_root / conversation_id / "secrets"
    folder.mkdir(parents=True)
    (folder / "key.txt").write_text("the key")
    decided = api.post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": listed["shown_hash"]})
    assert decided.status_code == 200, decided.text

    status_is(conversation_id, "idle")
    call.refresh_from_db()
    assert (call.status, call.result) == (ToolCall.Status.SUCCEEDED, "the key")
    assert Approval.objects.get(pk=approval.pk).decided_by == alice
    ask.refresh_from_db()
    assert ask.uses == 1
    reply = Message.objects.filter(conversation_id=conversation_id, role="assistant").last().content
    assert "the key" in reply

    # A read the rule does not match runs at once, with nobody asked.
    other = api.post("conversations", {"agent": "demo", "message": "read notes.txt"}).json()["id"]
    status_is(other, "idle")
    assert not Approval.objects.filter(conversation_id=other).exists()
