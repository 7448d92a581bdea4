"""What an A2A message decides (decisions.apply): a blanket approve or deny, per-id decisions with
their reasons, kagent's tool_approval_response, answers to questions, a plain-text yes; text beside
a data part is not read as a decision."""
import pytest

from agentlink import decisions, runs
from approvals.models import Approval
from approvals.services import decide
from chat.models import Message
from tests.agentlink.a2a_client import State, a2a_task, answer_of, message, refused, send, snapshot, statuses
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def test_a_blanket_approve_decides_every_pending_call_via_a2a_and_the_task_completes(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")

    assert send(task, alice, {"decision_type": "approve"}) == 2

    approvals = Approval.objects.filter(conversation_id=task.conversation_id).order_by("pk")
    assert [(a.status, a.decided_via, a.decided_by) for a in approvals] == [("approved", "a2a", alice)] * 2
    assert runs.read(task).state == State.TASK_STATE_COMPLETED


def test_a_blanket_deny_declines_a_pending_question_too(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")

    assert send(task, alice, {"decision_type": "reject", "reason": "not now"}) == 1

    question = Approval.objects.get(conversation_id=task.conversation_id)
    assert (question.status, question.decided_via, question.rejection_reason) == ("declined", "a2a", "not now")


def test_per_id_decisions_store_the_rejection_reason(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    keep, drop = pending_approvals(task.conversation)

    decided = send(task, alice, {"decisions": [
        {"id": str(keep.pk), "decision_type": "deny", "reason": "  keep a.txt, it has the notes  "},
        {"id": drop.pk, "decision_type": "approve", "reason": "fine"},
    ]})

    assert decided == 2
    keep.refresh_from_db()
    drop.refresh_from_db()
    assert (keep.status, keep.decided_via, keep.rejection_reason) == ("rejected", "a2a", "keep a.txt, it has the notes")
    assert (drop.status, drop.decided_via) == ("approved", "a2a")
    proto = snapshot(task)
    assert proto.status.state == State.TASK_STATE_COMPLETED
    assert "keep a.txt, it has the notes" in answer_of(proto)


def test_kagents_tool_approval_response_decides_plain_or_in_its_envelope(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    decided = send(task, alice, {"type": "tool_approval_response", "approvals": [
        {"id": first.pk, "approved": False, "rejection_reason": "not that one"}]},
        {"tool_approval_response": {"approvals": [{"id": second.pk, "approved": True}]}})

    assert decided == 2
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.rejection_reason, first.decided_via) == ("rejected", "not that one", "a2a")
    assert (second.status, second.decided_via) == ("approved", "a2a")


def test_an_invalid_answer_is_refused_by_the_service_and_a_valid_one_is_stored(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)

    refusal = refused(task, alice, {"answers": [{"id": question.pk, "answer": "beer"}]})
    assert refusal.message.startswith(f"Approval #{question.pk}: ") and "Choose one of: tea, coffee, water." in refusal.message
    assert refusal.message.endswith("Nothing was decided.")
    assert statuses(task) == ["pending"]

    assert send(task, alice, {"ask_user_response": {"answers": [{"id": question.pk, "answer": "coffee"}]}}) == 1

    question.refresh_from_db()
    assert (question.status, question.decided_via, question.decided_by) == ("answered", "a2a", alice)
    assert question.answer == "coffee"
    proto = snapshot(task)
    assert (proto.status.state, answer_of(proto)) == (State.TASK_STATE_COMPLETED, "You answered: coffee.")


def test_declining_a_question_stores_the_reason(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)

    assert send(task, alice, {"answers": [{"id": question.pk, "decline": True, "reason": "I am not thirsty"}]}) == 1

    question.refresh_from_db()
    assert (question.status, question.rejection_reason, question.decided_via) == ("declined", "I am not thirsty", "a2a")


def test_plain_text_yes_decides_a_single_pending_call_via_text(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    unclear = send(task, alice, "hmm, maybe")
    assert unclear == 0 and statuses(task) == ["pending"]
    reading = runs.read(task)
    assert reading.state == State.TASK_STATE_INPUT_REQUIRED
    assert reading.text.startswith("Your message will be answered once the pending calls are decided.")

    assert send(task, alice, "yes") == 0  # decided by the chat's typed rules, not counted here

    approval = Approval.objects.get(conversation_id=task.conversation_id)
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "text", alice)
    assert runs.read(task).state == State.TASK_STATE_COMPLETED


def test_text_beside_a_data_part_is_not_read_as_a_decision(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, _ = pending_approvals(task.conversation)

    assert send(task, alice, "yes, all of them", {"decisions": [{"id": first.pk, "decision_type": "deny"}]}) == 1

    assert statuses(task) == ["rejected", "pending"]
    assert not Message.objects.filter(conversation=task.conversation, content="yes, all of them").exists()


def test_refuse_decided_names_the_first_decision_for_a_task_that_no_longer_waits(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)

    with pytest.raises(decisions.Refused) as caught:
        decisions.refuse_decided(conversation=task.conversation,
                                 message=message({"decisions": [{"id": approval.pk, "decision_type": "deny"}]}))
    assert caught.value.data == {"id": approval.pk, "status": "approved", "decided_by": "alice", "decided_via": "chat"}
    # Anything else about a task that is over says nothing here (the handler says it is over).
    decisions.refuse_decided(conversation=task.conversation, message=message({"decision_type": "approve"}))
    decisions.refuse_decided(conversation=task.conversation, message=message("yes"))
