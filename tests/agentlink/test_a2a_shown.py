"""A2A decisions bound to the version the client was sent: a blanket reply decides only what its
pause listed (and says what it left alone), a call edited since is refused as changed until its new
shown_hash is sent, each client's pause is its own."""
import pytest

from a2a.types import a2a_pb2 as pb
from agentlink import decisions, handler
from agentlink.models import Task
from chat.models import ApiToken, Message, OutboxEmail
from tests.agentlink.a2a_client import (
    a2a_task,
    apply,
    data_parts,
    edit_as_if_by_an_approver,
    held_email_then_approved_on_the_page,
    refused,
    rpc,
    send,
    sent,
    statuses,
)
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def test_a_blanket_approve_never_decides_a_call_pending_since_the_pause_it_answers(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")  # the pause sent lists write_file only
    email = held_email_then_approved_on_the_page(task, alice)

    refusal = refused(task, alice, {"decision_type": "approve"})

    assert refusal.message.startswith(f"The pause you were sent listed none of the pending calls: #{email.pk} send_email")
    email.refresh_from_db()
    assert email.status == "pending"
    assert not OutboxEmail.objects.exists()

    # Once a pause listing it is sent (GetTask, a stream), the same reply decides it, at that version.
    [request] = data_parts(sent(task))["tool_approval"]["action_requests"]
    assert (request["id"], request["shown_hash"]) == (email.pk, email.shown_hash)
    assert send(task, alice, {"decision_type": "approve"}) == 1
    email.refresh_from_db()
    assert (email.status, email.decided_via) == ("approved", "a2a")


def test_a_blanket_reply_decides_what_its_pause_listed_and_says_what_it_left_alone(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)
    Task.objects.filter(pk=task.pk).update(shown={"": {str(first.pk): first.shown_hash}})  # a pause that listed only the first

    outcome = apply(task, alice, {"decision_type": "deny", "reason": "not now"})

    assert (outcome.decided, [a.pk for a in outcome.left_alone]) == (1, [second.pk])
    assert statuses(task) == ["rejected", "pending"]
    assert decisions.left_alone_notice(outcome.left_alone).startswith(f"Not decided: #{second.pk} delete_file, pending since")


def test_a_blanket_reply_over_json_rpc_answers_with_the_pause_and_the_calls_it_left_alone(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)
    token = ApiToken.issue(alice)
    client = ApiToken.hash_key(token)[:16]  # what this client was shown is kept under its token
    Task.objects.filter(pk=task.pk).update(shown={client: {str(first.pk): first.shown_hash}})
    blanket = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk),
                           "parts": [{"data": {"decision_type": "approve"}}]}}

    answer = rpc(token, "SendMessage", blanket)["result"]["task"]

    assert statuses(task) == ["approved", "pending"]
    assert answer["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert answer["status"]["message"]["parts"][0]["text"].startswith(f"Not decided: #{second.pk} delete_file")
    assert Task.objects.get(pk=task.pk).shown == {client: {str(second.pk): second.shown_hash}}  # the pause it answered with


def test_a_blanket_reply_to_a_call_edited_since_its_pause_is_refused_as_changed(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    edit_as_if_by_an_approver(approval, {"path": "a.txt", "content": "HELLO"})

    refusal = refused(task, alice, {"decision_type": "approve"})

    assert "changed" in refusal.message and refusal.message.endswith("Nothing was decided.")
    assert statuses(task) == ["pending"]


def test_a_decision_by_id_on_a_call_edited_since_it_was_requested_needs_the_shown_hash(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    requested = approval.shown_hash
    edit_as_if_by_an_approver(approval, {"path": "a.txt", "content": "HELLO"})
    token = ApiToken.issue(alice)

    def decision(**entry) -> dict:
        parts = [{"data": {"decisions": [{"id": approval.pk, "decision_type": "approve"} | entry]}}]
        return rpc(token, "SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m", "taskId": str(task.pk), "parts": parts}})

    for stale in (decision(), decision(shown_hash=requested)):
        assert stale["error"]["code"] == -32602 and "changed" in stale["error"]["message"], stale
    assert statuses(task) == ["pending"]

    [request] = data_parts(sent(task))["tool_approval"]["action_requests"]
    assert request["args"] == {"path": "a.txt", "content": "HELLO"} and request["shown_hash"] != requested
    done = decision(shown_hash=request["shown_hash"])["result"]["task"]

    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "a2a")


def test_plain_text_is_refused_while_a_call_its_pause_never_listed_waits(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    email = held_email_then_approved_on_the_page(task, alice)
    before = Message.objects.filter(conversation_id=task.conversation_id).count()

    refusal = refused(task, alice, "yes")

    assert f"#{email.pk} send_email changed or came after the pause you were sent" in refusal.message
    assert Message.objects.filter(conversation_id=task.conversation_id).count() == before
    email.refresh_from_db()
    assert email.status == "pending" and not OutboxEmail.objects.exists()


def test_every_entry_of_a_pause_carries_its_shown_hash(alice, agent):
    question_task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(question_task.conversation)
    [asked] = data_parts(sent(question_task))["ask_user_request"]["questions"]
    assert asked["shown_hash"] == question.shown_hash

    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    parts = data_parts(sent(task))
    approvals = pending_approvals(task.conversation)
    assert [r["shown_hash"] for r in parts["tool_approval"]["action_requests"]] == [a.shown_hash for a in approvals]
    assert [t["shown_hash"] for t in parts["tool_approval_request"]["tools"]] == [a.shown_hash for a in approvals]
    assert Task.objects.get(pk=task.pk).shown == {"": {str(a.pk): a.shown_hash for a in approvals}}


def test_a_pause_sent_to_another_client_never_widens_a_blanket_reply(alice, agent):
    """What each client was shown is its own (its token): a monitor listing alice's tasks is sent the
    email's pause, and the first client's blanket approve, answering the pause it was sent, still
    does not decide the email."""
    task = a2a_task(alice, agent, "write hello to a.txt")  # the first client (token "") is sent write_file
    email = held_email_then_approved_on_the_page(task, alice)

    handler._list_tasks(pb.ListTasksRequest(), alice, agent, client="monitor")

    refusal = refused(task, alice, {"decision_type": "approve"})
    assert refusal.message.startswith("The pause you were sent listed none of the pending calls")
    email.refresh_from_db()
    assert email.status == "pending" and not OutboxEmail.objects.exists()
