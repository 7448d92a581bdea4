"""A2A as the seeds' clients read it (issue 29): a pause marked `interrupt_type` on its task and on
its status-update event (kagent reads the event's), seed 004's `approval_request` in the pause and
its `approval_response` deciding it through approvals.services as every other reply does (the
version shown, four eyes, critical, step-up, expiry), and the calls that ran and their results as
kagent's `function_call` / `function_response` data parts. In process, eager Celery; the real
client drives the same in tests/e2e/protocols/test_a2a_seeds_e2e.py."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from agentlink import decisions, runs
from agentlink.runs import HITL_EXTENSION
from approvals.models import Approval
from approvals.services import STEP_UP
from chat.models import ApiToken
from tests.conftest import pending_approvals
from tests.agentlink.a2a_client import (
    a2a_task,
    answer_of,
    call,
    edit_as_if_by_an_approver,
    held_email_then_approved_on_the_page,
    message,
    refused,
    send,
    snapshot,
    statuses,
)

pytestmark = pytest.mark.django_db(transaction=True)

State = pb.TaskState
RESPONSE = {"type": "approval_response"}


def seed_requests(proto: pb.Task) -> list[dict]:
    return [part["data"] for part in MessageToDict(proto.status.message).get("parts", [])
            if part.get("data", {}).get("type") == "approval_request"]


def typed_parts(proto: pb.Task) -> list[tuple[str, dict, dict]]:
    """(artifact name, data, metadata) of each tool call and result artifact, in order."""
    return [(artifact.name, MessageToDict(artifact.parts[0].data), MessageToDict(artifact.parts[0].metadata))
            for artifact in proto.artifacts if artifact.name in ("tool_call", "tool_result")]


# --- The pause --------------------------------------------------------------------------------------


def test_a_pause_carries_seed_004s_approval_request_and_its_task_says_interrupt_type(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    proto = snapshot(task)

    [request] = seed_requests(proto)
    assert request == {
        "type": "approval_request", "id": approval.pk, "shown_hash": approval.shown_hash, "action": "write_file",
        "message": "Approve? Write a.txt (5 bytes) — asked by alice (Demo agent) (medium risk). Why: Medium risk: Demo agent asks a person before it makes this call.", "input": {"path": "a.txt", "content": "hello"},
        "options": ["approve", "deny", "modify"],
    }
    assert MessageToDict(proto.metadata) == {"interrupt_type": "tool_approval"}
    assert MessageToDict(proto.status.message.metadata)["interrupt_type"] == "tool_approval"
    assert {part["data"]["type"] for part in MessageToDict(proto.status.message)["parts"] if "data" in part} == {
        "tool_approval", "tool_approval_request", "approval_request"}  # besides what was sent before
    # kagent's part type on each of the pause's data parts (issue 39, item 2), beside its own "type"
    assert [part["metadata"] for part in MessageToDict(proto.status.message)["parts"] if "data" in part] == [
        {"type": kind, "kagent_type": "interrupt_data"} for kind in ("tool_approval", "tool_approval_request", "approval_request")]


def test_a_task_that_does_not_wait_has_no_interrupt_type(alice, agent):
    task = a2a_task(alice, agent, "read a.txt")
    proto = snapshot(task)
    assert proto.status.state == State.TASK_STATE_COMPLETED
    assert not proto.HasField("metadata") and not seed_requests(proto)


def test_a_pause_carries_kagents_hitl_extension_as_its_ui_reads_it(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    message = snapshot(task).status.message

    assert list(message.extensions) == [HITL_EXTENSION]
    assert MessageToDict(message.metadata)[HITL_EXTENSION] == {"type": "tool_approval_request", "tools": [
        {"id": str(approval.pk), "call_id": approval.tool_call.call_id, "name": "delete_file", "args": {"path": path}}
        for approval, path in ((first, "a.txt"), (second, "b.txt"))
    ]}


def test_kagents_ui_reply_decides_by_its_extension_not_by_its_text(alice, agent):
    """kagent's UI sends a text part for people and the decision in the extension's metadata."""
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)
    reply = message("No")
    reply.extensions.append(HITL_EXTENSION)
    reply.metadata.update({HITL_EXTENSION: {"type": "tool_approval_response", "approvals": [
        {"id": str(first.pk), "approved": True}, {"id": str(second.pk), "approved": False, "rejection_reason": "keep b"}]}})

    assert apply_message(task, alice, reply) == 2

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.decided_via) == ("approved", "a2a")
    assert (second.status, second.decided_via, second.rejection_reason) == ("rejected", "a2a", "keep b")


def test_kagents_ask_user_request_and_its_positional_answers(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)
    request = MessageToDict(snapshot(task).status.message.metadata)[HITL_EXTENSION]
    assert request == {"type": "ask_user_request", "id": str(question.pk),
                       "questions": [{"question": question.question["text"], "choices": ["tea", "coffee", "water"], "multiple": False}]}

    for wrong in ({"answers": []}, {"answers": [{"answer": "tea"}]}, {"id": ""}):
        reply = message()
        reply.metadata.update({HITL_EXTENSION: {"type": "ask_user_response", "id": request["id"]} | wrong})
        with pytest.raises(decisions.Refused):
            apply_message(task, alice, reply)
    reply = message()
    reply.metadata.update({HITL_EXTENSION: {"type": "ask_user_response", "id": request["id"], "answers": [{"answer": ["coffee"]}]}})

    assert apply_message(task, alice, reply) == 1

    assert answer_of(snapshot(task)) == "You answered: coffee."


def apply_message(task, user, built) -> int:
    reading = runs.read(task)
    return decisions.apply(conversation=task.conversation, user=user, message=built, pending=reading.pending or [],
                           shown=runs.shown_to_client(task)).decided


# --- approval_response ------------------------------------------------------------------------------


def test_approved_decides_the_pause_via_a2a_and_the_call_runs(alice, agent, settings):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    assert send(task, alice, RESPONSE | {"decision": "approved"}) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "a2a", alice)
    assert (settings.HITL_SANDBOX_ROOT / str(task.conversation_id) / "a.txt").read_text() == "hello"
    assert answer_of(snapshot(task)) == "I did write a.txt: Wrote 5 bytes to a.txt."


def test_denied_rejects_with_its_reason(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    assert send(task, alice, RESPONSE | {"decision": "denied", "reason": "  not that file  "}) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "a2a", "not that file")
    assert runs.read(task).state == State.TASK_STATE_COMPLETED


def test_modified_approves_the_modified_input_in_place_of_the_models_and_that_is_what_runs(alice, agent, settings):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    assert send(task, alice, RESPONSE | {"decision": "modified", "modified_input": {"path": "a.txt", "content": "bye"}}) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.edited_by) == ("approved", "a2a", alice)
    assert approval.edited_arguments == {"path": "a.txt", "content": "bye"}
    assert (settings.HITL_SANDBOX_ROOT / str(task.conversation_id) / "a.txt").read_text() == "bye"
    [(_, function_call, _), _] = typed_parts(snapshot(task))
    assert function_call["args"] == {"path": "a.txt", "content": "bye"}  # what ran, not what the model asked


# The Swift design's replies to the options its pause offers, as it writes them (issue 39, item 1):
# {"decision": "approve"} / {"decision": "deny", "reason": ...} / {"decision": "modify", "modifications": {...}}.


def test_the_swift_designs_approve_decides_like_approved(alice, agent, settings):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    assert send(task, alice, json.loads('{"decision": "approve"}')) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "a2a", alice)
    assert (settings.HITL_SANDBOX_ROOT / str(task.conversation_id) / "a.txt").read_text() == "hello"


def test_the_swift_designs_deny_rejects_with_its_reason(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    assert send(task, alice, json.loads('{"decision": "deny", "reason": "Not that file"}')) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "a2a", "Not that file")


def test_the_swift_designs_modify_approves_its_modifications_and_that_is_what_runs(alice, agent, settings):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    assert send(task, alice, json.loads('{"decision": "modify", "modifications": {"path": "a.txt", "content": "bye"}}')) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.edited_by, approval.edited_arguments) == ("approved", alice, {"path": "a.txt", "content": "bye"})
    assert (settings.HITL_SANDBOX_ROOT / str(task.conversation_id) / "a.txt").read_text() == "bye"


@pytest.mark.parametrize("response, says", [
    ({"decision": "modify"}, '"modified" needs "modified_input" (or "modifications")'),
    ({"decision": "modify", "modifications": "rm -rf /"}, '"modified" needs "modified_input" (or "modifications")'),
    ({"decision": "approve", "modifications": {"path": "b.txt"}}, '"modifications" goes with "decision": "modified" only.'),
    ({"decision": "modify", "modifications": {"path": "a.txt"}, "modified_input": {"path": "b.txt"}}, "one field in two spellings"),
])
def test_a_garbled_swift_reply_is_refused_clearly_and_decides_nothing(alice, agent, response, says):
    task = a2a_task(alice, agent, "write hello to a.txt")

    refusal = refused(task, alice, response)

    assert says in refusal.message
    assert statuses(task) == ["pending"]


def test_a_response_naming_its_call_by_id_decides_that_one_only(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    assert send(task, alice, RESPONSE | {"decision": "denied", "id": second.pk}) == 1

    assert statuses(task) == ["pending", "rejected"]


@pytest.mark.parametrize("response, says", [
    ({}, '"decision" is "approved", "denied" or "modified".'),
    ({"decision": "yes"}, '"decision" is "approved", "denied" or "modified".'),
    ({"decision": ["approved"]}, '"decision" is "approved", "denied" or "modified".'),
    ({"decision": "modified"}, '"modified" needs "modified_input"'),
    ({"decision": "modified", "modified_input": "rm -rf /"}, '"modified" needs "modified_input"'),
    ({"decision": "modified", "modified_input": [1, 2]}, '"modified" needs "modified_input"'),
    ({"decision": "approved", "modified_input": {"path": "b.txt"}}, '"modified_input" goes with "decision": "modified" only.'),
    ({"decision": "approved", "id": "one"}, 'Each decision names its call by "id"'),
    ({"decision": "approved", "id": 10**9}, "is not one of this task's pending calls."),
    ({"decision": "approved", "id": 1, "shown_hash": 5}, '"shown_hash" is the string the pause lists'),
    ({"decision": "modified", "modified_input": {"path": 5}}, "Nothing was decided."),
])
def test_a_garbage_approval_response_is_refused_clearly_and_decides_nothing(alice, agent, response, says):
    task = a2a_task(alice, agent, "write hello to a.txt")

    refusal = refused(task, alice, RESPONSE | response)

    assert says in refusal.message
    assert statuses(task) == ["pending"]


def test_modified_without_an_id_when_the_pause_lists_two_calls_is_refused(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")

    refusal = refused(task, alice, RESPONSE | {"decision": "modified", "modified_input": {"path": "c.txt"}})

    assert '"modified" changes one tool call: name it with "id"' in refusal.message
    assert statuses(task) == ["pending", "pending"]


def test_approved_never_decides_a_call_its_pause_did_not_list(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    email = held_email_then_approved_on_the_page(task, alice)

    refusal = refused(task, alice, RESPONSE | {"decision": "approved"})

    assert f"#{email.pk} send_email came after it" in refusal.message
    email.refresh_from_db()
    assert email.status == "pending"


def test_a_response_to_a_call_edited_since_its_pause_is_refused_as_changed(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    edit_as_if_by_an_approver(approval, {"path": "a.txt", "content": "hel\u200blo"})

    for response in ({"decision": "approved"}, {"decision": "modified", "modified_input": {"path": "a.txt", "content": "x"}}):
        assert "changed" in refused(task, alice, RESPONSE | response).message
    assert statuses(task) == ["pending"]


def test_four_eyes_holds_for_approved_and_modified_not_for_denied(alice, ops_agent):
    task = a2a_task(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(task.conversation)

    for response in ({"decision": "approved"}, {"decision": "modified", "modified_input": {"path": "b.txt"}}):
        assert "four eyes" in refused(task, alice, RESPONSE | response).message
    assert statuses(task) == ["pending"]
    assert send(task, alice, RESPONSE | {"decision": "denied"}) == 1
    assert statuses(task) == ["rejected"]


def test_a_critical_call_needs_its_confirmation(alice, agent):
    task = a2a_task(alice, agent, "delete all files")

    refusal = refused(task, alice, RESPONSE | {"decision": "approved"})

    assert 'is critical: approve it with "confirmation": "DELETE"' in refusal.message
    assert statuses(task) == ["pending"]
    assert send(task, alice, RESPONSE | {"decision": "approved", "confirmation": "DELETE"}) == 1
    assert statuses(task) == ["approved"]


def test_a_call_that_needs_a_passkey_is_not_approved_over_a2a(alice, agent):
    agent.step_up_from_risk = "critical"
    agent.save(update_fields=["step_up_from_risk"])
    task = a2a_task(alice, agent, "delete all files")

    refusal = refused(task, alice, RESPONSE | {"decision": "approved", "confirmation": "DELETE"})

    assert STEP_UP in refusal.message
    assert statuses(task) == ["pending"]


def test_an_expired_call_is_not_approved(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    refused(task, alice, RESPONSE | {"decision": "approved"})

    approval.refresh_from_db()
    assert approval.status == "expired"


# --- What ran, as kagent reads it ---------------------------------------------------------------


def test_the_calls_that_ran_and_their_results_are_function_call_and_function_response_parts(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    assert typed_parts(snapshot(task)) == []  # waiting: it is in the pause, not among what ran
    send(task, alice, RESPONSE | {"decision": "approved"})

    [(call_name, function_call, call_meta), (result_name, function_response, result_meta)] = typed_parts(snapshot(task))

    call_id = approval.tool_call.call_id
    assert (call_name, function_call) == ("tool_call", {"id": call_id, "name": "write_file", "args": {"path": "a.txt", "content": "hello"}})
    assert call_meta == {"kagent_type": "function_call", "adk_type": "function_call"}
    assert (result_name, function_response) == ("tool_result", {
        "id": call_id, "name": "write_file", "response": {"result": "Wrote 5 bytes to a.txt.", "isError": False}})
    assert result_meta == {"kagent_type": "function_response", "adk_type": "function_response"}


def test_a_rejected_call_has_an_error_response(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, RESPONSE | {"decision": "denied", "reason": "no"})

    [_, (_, function_response, _)] = typed_parts(snapshot(task))

    assert function_response["response"]["isError"] is True and "no" in function_response["response"]["result"]


# --- Over JSON-RPC: the stream -----------------------------------------------------------------------


def stream(token: str, params: dict) -> list[dict]:
    """SendStreamingMessage through the ASGI app: every event's result, in order."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": params}
    response = call("POST", "/a2a/demo/", token=token, headers={"A2A-Version": "1.0"}, json=body)
    assert response.status_code == 200, response.text
    events = [json.loads(line[len("data:"):]) for line in response.text.splitlines() if line.startswith("data:")]
    return [event["result"] for event in events]


def test_the_streams_status_update_of_a_pause_has_interrupt_type_and_the_run_streams_its_calls(alice, agent):
    token = ApiToken.issue(alice)
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "write hello to a.txt"}]}

    events = stream(token, {"message": message})

    paused = events[-1]
    if "statusUpdate" in paused:
        assert paused["statusUpdate"]["metadata"] == {"interrupt_type": "tool_approval"}
        task_id = paused["statusUpdate"]["taskId"]
    else:  # the loop ran inline (eager Celery): the stream's first event is the paused task
        assert paused["task"]["metadata"] == {"interrupt_type": "tool_approval"}
        task_id = paused["task"]["id"]

    reply = {"role": "ROLE_USER", "messageId": "m2", "taskId": task_id, "parts": [{"data": RESPONSE | {"decision": "approved"}}]}
    events = stream(token, {"message": reply})

    # Eager Celery ran the rest inline: the first event is the finished task; the e2e test sees them one by one.
    artifacts = events[0]["task"].get("artifacts", []) + [event["artifactUpdate"]["artifact"] for event in events if "artifactUpdate" in event]
    assert [artifact["name"] for artifact in artifacts] == ["tool_call", "tool_result", "answer"]
    assert artifacts[0]["parts"][0]["metadata"] == {"kagent_type": "function_call", "adk_type": "function_call"}
    last = events[-1].get("statusUpdate") or events[-1]["task"]
    assert last["status"]["state"] == "TASK_STATE_COMPLETED" and "metadata" not in last
