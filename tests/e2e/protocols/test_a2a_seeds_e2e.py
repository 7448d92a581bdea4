"""A2A as the seeds' clients expect it, end to end (issue 29): the real `a2a-sdk` client against
daphne, the loop and the push deliveries in a real Celery worker. The pause's status-update event
says `interrupt_type`, seed 004's `approval_response` decides it (approved, denied, modified), the
calls that ran stream as kagent's typed parts, and push notifications reach a local receiver."""
import pytest
from google.protobuf.json_format import MessageToDict

from a2a.utils.errors import A2AError
from agentlink.runs import HITL_EXTENSION
from approvals.models import Approval
from tests.conftest import wait_until
from tests.e2e.a2a_client import State, answer_of
from tests.agentlink.test_agentlink_push import Receiver

pytestmark = pytest.mark.e2e


def seed_request(message) -> dict:
    [request] = [part["data"] for part in MessageToDict(message)["parts"] if part.get("data", {}).get("type") == "approval_request"]
    return request


def test_the_pauses_status_update_says_interrupt_type_and_approved_streams_the_call_as_kagent_reads_it(e2e, a2a, alice, agent):
    client = a2a(alice, streaming=True)

    events = client.send("write hello to a.txt")

    [pause] = [e.status_update for e in events if e.HasField("status_update")][-1:]
    assert pause.status.state == State.TASK_STATE_INPUT_REQUIRED
    assert MessageToDict(pause.metadata) == {"interrupt_type": "tool_approval"}
    assert list(pause.status.message.extensions) == [HITL_EXTENSION]  # kagent's UI reads the pause there
    [tool] = MessageToDict(pause.status.message.metadata)[HITL_EXTENSION]["tools"]
    request = seed_request(pause.status.message)
    assert tool["id"] == str(int(request["id"]))
    assert (request["action"], request["options"]) == ("write_file", ["approve", "deny", "modify"])

    events = client.send({"type": "approval_response", "decision": "approved"}, task_id=pause.task_id)

    artifacts = list(events[0].task.artifacts) + [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert [artifact.name for artifact in artifacts] == ["tool_call", "tool_result", "answer"]
    call, result = (MessageToDict(artifact.parts[0]) for artifact in artifacts[:2])
    assert (call["metadata"]["kagent_type"], call["data"]["name"], call["data"]["args"]) == (
        "function_call", "write_file", {"path": "a.txt", "content": "hello"})
    assert (result["metadata"]["kagent_type"], result["data"]["response"]) == (
        "function_response", {"result": "Wrote 5 bytes to a.txt.", "isError": False})
    final = [e.status_update for e in events if e.HasField("status_update")][-1]
    assert final.status.state == State.TASK_STATE_COMPLETED and not final.HasField("metadata")
    approval = Approval.objects.get(conversation_id=pause.context_id)
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "a2a", alice)


def test_modified_runs_the_modified_input_and_denied_rejects_with_its_reason_and_garbage_decides_nothing(e2e, a2a, alice, agent):
    client = a2a(alice)
    task = client.task("write hello to a.txt")

    with pytest.raises(A2AError) as refused:
        client.task({"type": "approval_response", "decision": "maybe"}, task_id=task.id)
    assert '"decision" is "approved", "denied" or "modified".' in str(refused.value)
    done = client.task({"type": "approval_response", "decision": "modified", "modified_input": {"path": "a.txt", "content": "bye"}},
                       task_id=task.id)

    assert done.status.state == State.TASK_STATE_COMPLETED
    assert 'alice changed the arguments before approving (content: "hello" → "bye")' in answer_of(done)
    assert (e2e.sandbox_root / task.context_id / "a.txt").read_text() == "bye"
    approval = Approval.objects.get(conversation_id=task.context_id)
    assert (approval.status, approval.decided_via, approval.edited_arguments) == ("approved", "a2a", {"path": "a.txt", "content": "bye"})

    second = client.task("write hello to b.txt", context_id=task.context_id)
    done = client.task({"type": "approval_response", "decision": "denied", "reason": "not b"}, task_id=second.id)

    assert done.status.state == State.TASK_STATE_COMPLETED
    denied = Approval.objects.filter(conversation_id=task.context_id).latest("pk")
    assert (denied.status, denied.decided_via, denied.rejection_reason) == ("rejected", "a2a", "not b")
    assert not (e2e.sandbox_root / task.context_id / "b.txt").exists()


def test_push_configs_are_set_listed_and_deleted_and_a_local_receiver_hears_the_pause_and_the_end(e2e, a2a, alice, mallory, agent):
    client, receiver = a2a(alice), Receiver()
    try:
        task = client.task("write hello to a.txt")
        with pytest.raises(A2AError) as refused:
            client.set_push(task.id, receiver.url, token="secret")
        assert "Refused: 127.0.0.1 is a private address" in str(refused.value)  # until the operator allows it
        agent.allow_private_fetch = True
        agent.save(update_fields=["allow_private_fetch"])

        made = client.set_push(task.id, receiver.url, token="secret")
        client.set_push(task.id, receiver.url, token="spare-token", config_id="spare")
        assert (made.id, made.task_id) == (task.id, task.id)
        assert [config.id for config in client.push_configs(task.id)] == [task.id, "spare"]
        client.delete_push(task.id, "spare")
        assert [(config.id, config.token) for config in client.push_configs(task.id)] == [(task.id, "secret")]
        with pytest.raises(A2AError):
            a2a(mallory).push_configs(task.id)

        wait_until(lambda: "TASK_STATE_INPUT_REQUIRED" in receiver.states("secret"), message="the pause, posted")
        client.get(task.id)  # the pause the reply answers, read
        client.task({"type": "approval_response", "decision": "approved"}, task_id=task.id)
        wait_until(lambda: "TASK_STATE_COMPLETED" in receiver.states("secret"), message="the end, posted")
    finally:
        receiver.server.shutdown()
    secret = receiver.states("secret")
    assert secret.index("TASK_STATE_INPUT_REQUIRED") < secret.index("TASK_STATE_COMPLETED")
    assert all(body["task"]["id"] == task.id for _, body in receiver.received)
    assert "TASK_STATE_COMPLETED" not in receiver.states("spare-token")  # deleted before the end: told nothing of it


# The Swift AgentKit design's replies, byte for byte, through the real client (issue 39, item 1),
# and kagent's part type on the pause (item 2).
SWIFT_APPROVE = '{"decision": "approve"}'
SWIFT_DENY = '{"decision": "deny", "reason": "Not during the freeze"}'
SWIFT_MODIFY = '{"decision": "modify", "modifications": {"path": "a.txt", "content": "bye"}}'


def test_the_swift_designs_approve_deny_and_modify_decide_through_the_real_client(e2e, a2a, alice, agent):
    import json

    client = a2a(alice)
    task = client.task("write hello to a.txt")
    [part] = [p for p in MessageToDict(task.status.message)["parts"] if p.get("data", {}).get("type") == "approval_request"]
    assert part["metadata"] == {"type": "approval_request", "kagent_type": "interrupt_data"}
    assert part["data"]["options"] == ["approve", "deny", "modify"]

    done = client.task(json.loads(SWIFT_MODIFY), task_id=task.id)
    assert done.status.state == State.TASK_STATE_COMPLETED
    assert (e2e.sandbox_root / task.context_id / "a.txt").read_text() == "bye"

    second = client.task("write hello to b.txt", context_id=task.context_id)
    done = client.task(json.loads(SWIFT_DENY), task_id=second.id)
    denied = Approval.objects.filter(conversation_id=task.context_id).latest("pk")
    assert (denied.status, denied.decided_via, denied.rejection_reason) == ("rejected", "a2a", "Not during the freeze")

    third = client.task("write hello to c.txt", context_id=task.context_id)
    done = client.task(json.loads(SWIFT_APPROVE), task_id=third.id)
    assert done.status.state == State.TASK_STATE_COMPLETED
    assert (e2e.sandbox_root / task.context_id / "c.txt").read_text() == "hello"
    approved = Approval.objects.filter(conversation_id=task.context_id).latest("pk")
    assert (approved.status, approved.decided_via, approved.decided_by) == ("approved", "a2a", alice)


def test_kagents_typed_cancel_rejects_through_the_real_client(e2e, a2a, alice, agent):
    """kagent's UI answers a pause it will not approve with the text "cancel" (issue 39, item 2)."""
    client = a2a(alice)
    task = client.task("write hello to d.txt")

    done = client.task("cancel", task_id=task.id)

    assert done.status.state == State.TASK_STATE_COMPLETED
    rejected = Approval.objects.filter(conversation_id=task.context_id).latest("pk")
    # A typed reply is a message in the conversation, decided as the chat's typed replies are (via text).
    assert (rejected.status, rejected.decided_via, rejected.decided_by) == ("rejected", "text", alice)
    assert not (e2e.sandbox_root / task.context_id / "d.txt").exists()
