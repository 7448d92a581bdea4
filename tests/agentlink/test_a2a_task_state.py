"""A task's A2A state, read from the conversation's rows (agentlink.runs): input-required with its
calls or question, completed with its answer, canceled by the Stop, closed by the next task of its
context, busy while it waits, found only by its owner; the state computed in SQL agrees."""
import pytest
from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from agentlink import runs
from agentlink.models import Task
from chat import services
from chat.models import Conversation, Message
from tests.agentlink.a2a_client import State, a2a_task, answer_of, data_parts, send, snapshot, statuses
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def text_of(proto: pb.Task) -> str:
    return "".join(part.text for part in proto.status.message.parts)


def test_a_paused_task_is_input_required_with_action_requests_and_kagents_tool_approval_request(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    reading = runs.read(task)
    proto = runs.as_proto(task, reading)

    assert reading.state == State.TASK_STATE_INPUT_REQUIRED and [a.pk for a in reading.pending] == [approval.pk]
    assert (proto.id, proto.context_id) == (str(task.pk), str(task.conversation_id))
    assert proto.status.state == State.TASK_STATE_INPUT_REQUIRED
    assert MessageToDict(proto.status.message)["metadata"]["interrupt_type"] == "tool_approval"
    assert f"#{approval.pk} write_file" in text_of(proto) and text_of(proto).startswith("1 call waits for a human decision")
    parts = data_parts(proto)
    assert parts["tool_approval"]["interrupt_type"] == "tool_approval"
    [request] = parts["tool_approval"]["action_requests"]
    assert (request["name"], request["args"], request["id"]) == ("write_file", {"path": "a.txt", "content": "hello"}, approval.pk)
    assert request["risk"] == approval.risk and request["confirmation_required"] is False
    [tool] = parts["tool_approval_request"]["tools"]
    assert request["shown_hash"] == approval.shown_hash
    assert tool == {"id": approval.pk, "call_id": approval.tool_call.call_id, "name": "write_file",
                    "args": {"path": "a.txt", "content": "hello"}, "shown_hash": approval.shown_hash}
    assert "ask_user_request" not in parts
    assert not proto.artifacts
    assert [m.parts[0].text for m in proto.history] == ["write hello to a.txt"]


def test_a_question_is_input_required_with_ask_user_request(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)

    proto = snapshot(task)

    assert proto.status.state == State.TASK_STATE_INPUT_REQUIRED
    parts = data_parts(proto)
    assert set(parts) == {"ask_user_request"}
    [asked] = parts["ask_user_request"]["questions"]
    assert (asked["id"], asked["type"], asked["options"]) == (question.pk, "choice", ["tea", "coffee", "water"])
    assert f"#{question.pk} asks: " in text_of(proto)


def test_a_completed_task_carries_its_answer_as_an_artifact(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, {"decision_type": "approve"})

    reading = runs.read(task)
    proto = runs.as_proto(task, reading)

    assert reading.state == State.TASK_STATE_COMPLETED and reading.pending is None
    assert proto.status.state == State.TASK_STATE_COMPLETED
    [artifact] = [artifact for artifact in proto.artifacts if artifact.name == "answer"]
    assert artifact.parts[0].text == "I did write a.txt: Wrote 5 bytes to a.txt."
    assert text_of(proto) == "I did write a.txt: Wrote 5 bytes to a.txt."
    assert [m.role for m in proto.history][0] == pb.Role.ROLE_USER
    assert proto.history[-1].parts[0].text == "I did write a.txt: Wrote 5 bytes to a.txt."
    assert len(runs.as_proto(task, reading, history_length=1).history) == 1
    assert len(runs.as_proto(task, reading, history_length=0).history) == 0


def test_a_second_task_in_the_same_context_closes_the_first_with_its_final_state(alice, agent):
    first = a2a_task(alice, agent, "write hello to a.txt")
    send(first, alice, {"decision_type": "approve"})
    first_answer = answer_of(snapshot(first))

    second = a2a_task(alice, agent, "read a.txt", conversation=first.conversation)

    first.refresh_from_db()
    assert first.final_state == Task.FinalState.COMPLETED and second.final_state == ""
    assert second.conversation_id == first.conversation_id and second.position > first.position
    assert runs.read(first).state == State.TASK_STATE_COMPLETED
    assert answer_of(snapshot(first)) == first_answer  # its own turn's answer, not the next one's
    assert "read a.txt" not in [m.parts[0].text for m in snapshot(first).history]
    assert runs.read(second).state == State.TASK_STATE_COMPLETED
    assert [m.parts[0].text for m in snapshot(second).history][0] == "read a.txt"


def test_a_stopped_task_stays_canceled_once_the_next_task_begins(alice, agent):
    first = a2a_task(alice, agent, "write hello to a.txt")
    services.stop_conversation(conversation=first.conversation, user=alice, via="chat")

    second = a2a_task(alice, agent, "read a.txt", conversation=Conversation.objects.get(pk=first.conversation_id))

    first.refresh_from_db()
    assert first.final_state == Task.FinalState.CANCELED
    assert runs.read(first).state == State.TASK_STATE_CANCELED
    assert runs.read(second).state == State.TASK_STATE_COMPLETED


def test_a_new_task_on_a_context_that_waits_for_a_decision_is_busy(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    before = Message.objects.filter(conversation=task.conversation).count()

    with pytest.raises(runs.Busy) as busy:
        a2a_task(alice, agent, "read a.txt", conversation=task.conversation)

    assert str(busy.value).startswith(f"Task {task.pk} is not over")
    assert Task.objects.filter(conversation=task.conversation).count() == 1
    assert Message.objects.filter(conversation=task.conversation).count() == before
    assert statuses(task) == ["pending"]


def test_a_task_stopped_in_the_chat_reads_canceled(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    services.stop_conversation(conversation=task.conversation, user=alice, via="chat")

    reading = runs.read(task)
    assert reading.state == State.TASK_STATE_CANCELED and reading.text == "Stopped by alice."
    assert statuses(task) == ["cancelled"]
    proto = runs.as_proto(task, reading)
    assert proto.status.state == State.TASK_STATE_CANCELED and text_of(proto) == "Stopped by alice." and not answer_of(proto)


def test_a_completed_task_stays_completed_when_the_next_turn_is_typed_in_the_chat(alice, agent):
    """A task's turn ends where the next one begins, wherever it is typed: a finished task never
    comes back to life with the chat turn's calls (A2A: a terminal state is final)."""
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, {"decision_type": "approve"})
    assert snapshot(task).status.state == State.TASK_STATE_COMPLETED

    services.post_message(conversation=Conversation.objects.get(pk=task.conversation_id), user=alice,
                          content="delete a.txt and b.txt")  # the next turn, in the chat, not over A2A

    proto = snapshot(Task.objects.get(pk=task.pk))
    assert proto.status.state == State.TASK_STATE_COMPLETED, "a completed task came back to life"
    assert answer_of(proto) == "I did write a.txt: Wrote 5 bytes to a.txt."


def test_only_the_owners_tasks_and_contexts_are_found(alice, mallory, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    assert runs.task_for(alice, agent, str(task.pk)) == task
    assert runs.task_for(mallory, agent, str(task.pk)) is None
    assert runs.task_for(alice, agent, "not-a-uuid") is None
    assert runs.conversation_for(mallory, agent, str(task.conversation_id)) is None
    assert runs.conversation_for(alice, agent, str(task.conversation_id)) == task.conversation


def test_the_state_computed_in_sql_is_the_state_read_from_the_rows_in_every_state(alice, agent):
    paused = a2a_task(alice, agent, "write hello to a.txt")
    completed = a2a_task(alice, agent, "what is 2 + 2")
    stopped = a2a_task(alice, agent, "write hello to b.txt")
    services.stop_conversation(conversation=stopped.conversation, user=alice, via="chat")
    canceled = a2a_task(alice, agent, "write hello to c.txt")
    Task.objects.filter(pk=canceled.pk).update(canceled=True)
    services.stop_conversation(conversation=canceled.conversation, user=alice, via="a2a")
    closed = a2a_task(alice, agent, "what is 3 + 3")
    a2a_task(alice, agent, "what is 4 + 4", conversation=Conversation.objects.get(pk=closed.conversation_id))
    failed = a2a_task(alice, agent, "what is 5 + 5")
    Conversation.objects.filter(pk=failed.conversation_id).update(status=Conversation.Status.FAILED, error="The model is down.")
    working = a2a_task(alice, agent, "what is 6 + 6")
    Conversation.objects.filter(pk=working.conversation_id).update(status=Conversation.Status.RUNNING)
    silent = Task.objects.create(conversation=Conversation.objects.create(owner=alice, agent=agent), position=1)

    in_sql = dict(runs.with_state(Task.objects.all()).values_list("pk", "a2a_state"))
    read = {task.pk: runs.read(task).state for task in Task.objects.all()}

    assert in_sql == read
    assert {in_sql[t.pk] for t in (paused, completed, stopped, canceled, closed, failed, working, silent)} == {
        State.TASK_STATE_INPUT_REQUIRED, State.TASK_STATE_COMPLETED, State.TASK_STATE_CANCELED,
        State.TASK_STATE_FAILED, State.TASK_STATE_WORKING}
