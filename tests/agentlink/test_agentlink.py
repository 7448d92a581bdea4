"""Agents over A2A, in process (agentlink): decisions read from a task's message and checked against
the rows before anything is decided, a task's state read from the conversation, and the ASGI app's
gate (token, agent, body, host, per-token caps) with the JSON-RPC answers; decisions bound to the
versions the client was sent; ListTasks paged in SQL; internal errors that leak nothing. The loop
runs inline with the scripted model (eager Celery); tests/e2e/protocols/test_a2a_e2e.py drives the same
through daphne and a worker, tests/e2e/faults/test_a2a_load.py under load."""
import asyncio
import json
import threading
import time
from datetime import UTC, timedelta

import httpx
import pytest
from asgiref.sync import SyncToAsync
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from agentlink import decisions, handler, limits, runs
from agentlink.app import MAX_BODY_BYTES, application
from agentlink.models import Task
from approvals.deciders import routemaking
from approvals.models import Approval
from approvals.services import decide
from chat import services
from chat.models import ApiToken, Conversation, Message, OutboxEmail
from chat.tools import arguments_hash
from tests.conftest import asgi_call, finance_group, pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)

State = pb.TaskState


# --- Helpers -----------------------------------------------------------------------------------------


def a2a_task(user, agent, text: str, conversation=None) -> Task:
    """A task started as the A2A handler starts one (the loop has run by the time it returns), its
    pause, if any, sent to the client as the blocking answer sends it (recorded as shown)."""
    task = runs.start(user=user, agent=agent, text=text, conversation=conversation)
    sent(task)
    return task


def sent(task: Task) -> pb.Task:
    """The task as the server sends it now (GetTask, a stream's update): a pause it lists is recorded."""
    reading = runs.read(task)
    runs.note_shown(task, reading)
    return runs.as_proto(task, reading)


def message(*parts) -> pb.Message:
    """A user message of text parts (str) and data parts (anything else, as JSON)."""
    built = pb.Message(role=pb.Role.ROLE_USER, message_id="m-1")
    for part in parts:
        if isinstance(part, str):
            built.parts.append(pb.Part(text=part))
        else:
            data = pb.Part()
            if part == {}:
                data.data.struct_value.SetInParent()  # an explicit empty object (update({}) sets nothing)
            else:
                data.data.struct_value.update(part)
            built.parts.append(data)
    return built


def send(task: Task, user, *parts, pending=None) -> int:
    """decisions.apply as the handler calls it: on what is pending now, and what the last pause sent
    listed. Returns how many calls it decided."""
    return apply(task, user, *parts, pending=pending).decided


def apply(task: Task, user, *parts, pending=None) -> decisions.Outcome:
    reading = runs.read(task)
    now = (reading.pending or []) if pending is None else pending
    return decisions.apply(conversation=task.conversation, user=user, message=message(*parts), pending=now,
                           shown=runs.shown_to_client(task))


def refused(task: Task, user, *parts, pending=None) -> decisions.Refused:
    with pytest.raises(decisions.Refused) as caught:
        send(task, user, *parts, pending=pending)
    return caught.value


def statuses(task: Task) -> list[str]:
    return list(Approval.objects.filter(conversation_id=task.conversation_id).order_by("pk").values_list("status", flat=True))


def data_parts(proto: pb.Task) -> dict:
    return {part["data"]["type"]: part["data"] for part in MessageToDict(proto.status.message).get("parts", []) if "data" in part}


def text_of(proto: pb.Task) -> str:
    return "".join(part.text for part in proto.status.message.parts)


def snapshot(task: Task) -> pb.Task:
    return runs.as_proto(task, runs.read(task))


def answer_of(proto: pb.Task) -> str:
    """The answer artifact's text (the tool calls and results are artifacts of their own)."""
    return "".join(part.text for artifact in proto.artifacts if artifact.name == "answer" for part in artifact.parts)


# --- decisions.apply: refusals decide nothing ------------------------------------------------------


def test_an_id_decided_twice_in_one_message_is_refused_and_decides_nothing(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    twice = refused(task, alice, {"decisions": [{"id": first.pk, "decision_type": "approve"},
                                                {"id": first.pk, "decision_type": "deny"}]})
    across_parts = refused(task, alice, {"decisions": [{"id": second.pk, "decision_type": "approve"}]},
                           {"approvals": [{"id": second.pk, "approved": False}]})

    assert f"Approval #{first.pk} is decided twice" in twice.message
    assert f"Approval #{second.pk} is decided twice" in across_parts.message
    assert statuses(task) == ["pending", "pending"]


def test_an_id_that_is_not_one_of_the_tasks_pending_calls_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    other = a2a_task(alice, agent, "write hello to b.txt")
    [theirs] = pending_approvals(other.conversation)

    for wrong in (theirs.pk, 999_999):
        refusal = refused(task, alice, {"decisions": [{"id": wrong, "decision_type": "approve"}]})
        assert refusal.message == f"Approval #{wrong} is not one of this task's pending calls."
        assert refusal.data is None  # another conversation's approval is not described
    for no_id in ({"decision_type": "approve"}, {"id": 0, "decision_type": "approve"}, {"id": True, "decision_type": "approve"},
                  {"id": "#1", "decision_type": "approve"}):
        assert 'names its call by "id"' in refused(task, alice, {"decisions": [no_id]}).message
    assert statuses(task) == ["pending"] and statuses(other) == ["pending"]


def test_an_id_already_decided_names_who_decided_and_via_what(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    decide(approval.pk, user=alice, approve=False, via="api", reason="no", shown_hash=approval.shown_hash)

    refusal = refused(task, alice, {"decisions": [{"id": approval.pk, "decision_type": "approve"}]})

    assert refusal.message == f"Approval #{approval.pk} was already rejected by alice via api."
    assert refusal.data == {"id": approval.pk, "status": "rejected", "decided_by": "alice", "decided_via": "api"}
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "api", "no")


def test_a_decision_that_loses_the_race_to_another_surface_is_refused_naming_the_winner(alice, bob, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    shown = runs.read(task).pending  # what the task showed before bob decided in the dashboard
    first, second = shown
    decide(second.pk, user=bob, approve=False, via="dashboard", reason="keep b", shown_hash=second.shown_hash)

    refusal = refused(task, alice, {"decisions": [{"id": first.pk, "decision_type": "deny"},
                                                  {"id": second.pk, "decision_type": "approve"}]}, pending=shown)

    assert refusal.message.startswith(f"Approval #{second.pk} was already rejected by bob via dashboard.")
    assert refusal.message.endswith("Nothing was decided.")  # every decision is checked before any is made
    assert refusal.data["decided_by"] == "bob" and refusal.data["decided_via"] == "dashboard"
    assert [(a.status, a.decided_via) for a in Approval.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")] == [
        ("pending", ""), ("rejected", "dashboard")]


def test_a_bad_decision_type_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    for decision_type in ("maybe", "APPROVE", True, None, 1):
        blanket = refused(task, alice, {"decision_type": decision_type})
        per_id = refused(task, alice, {"decisions": [{"id": approval.pk, "decision_type": decision_type}]})
        assert blanket.message == per_id.message == '"decision_type" is "approve" or "deny".', decision_type
    assert statuses(task) == ["pending"]


UNREADABLE = [
    ([{}], "That data part decides nothing."),
    ([{"approve": True}], "That data part decides nothing."),
    ([{"type": "tool_approval_response"}], "That data part decides nothing."),
    ([{"decisions": []}], '"decisions" is a non-empty list of objects.'),
    ([{"decisions": "approve"}], '"decisions" is a non-empty list of objects.'),
    ([{"approvals": [1, 2]}], '"approvals" is a non-empty list of objects.'),
    ([{"answers": [{"id": 1}]}], 'Each of "answers" needs "answer", or "decline": true.'),
    ([], "The message has no text and no data part"),
    (["   "], "The message has no text and no data part"),
]


def test_an_empty_or_unknown_data_part_is_refused_and_says_which_shapes_decide(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    for parts, says in UNREADABLE:
        refusal = refused(task, alice, *parts)
        assert refusal.message.startswith(says), parts
        assert refusal.data is None
    assert decisions.SHAPES in refused(task, alice, {"foo": 1}).message

    assert statuses(task) == ["pending"]
    assert Message.objects.filter(conversation=task.conversation, role="user").count() == 1  # nothing posted


def test_a_data_part_that_is_not_an_object_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    part = pb.Part()
    part.data.list_value.values.add().string_value = "approve"
    built = pb.Message(role=pb.Role.ROLE_USER, message_id="m-1", parts=[part])

    with pytest.raises(decisions.Refused) as caught:
        decisions.apply(conversation=task.conversation, user=alice, message=built, pending=runs.read(task).pending, shown={})

    assert caught.value.message.startswith("A data part must be a JSON object.")
    assert statuses(task) == ["pending"]


def test_approved_that_is_not_a_bool_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    for approved in ("yes", 1, None, "true"):
        entry = {"id": approval.pk} | ({} if approved is None else {"approved": approved})
        refusal = refused(task, alice, {"type": "tool_approval_response", "approvals": [entry]})
        assert refusal.message == 'Each of "approvals" needs "approved": true or false.', approved
    assert statuses(task) == ["pending"]


def test_approving_a_question_is_refused_it_must_be_answered(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)
    assert question.kind == Approval.Kind.QUESTION

    per_id = refused(task, alice, {"decisions": [{"id": question.pk, "decision_type": "approve"}]})
    kagent = refused(task, alice, {"approvals": [{"id": question.pk, "approved": True}]})
    blanket = refused(task, alice, {"decision_type": "approve"})  # a blanket approve skips questions

    assert per_id.message.startswith(f"Approval #{question.pk} is a question: answer it with")
    assert kagent.message == per_id.message
    assert blanket.message.startswith("The message decides none of the pending calls.")
    assert statuses(task) == ["pending"]


def test_answering_a_tool_call_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    for entry in ({"id": approval.pk, "answer": "yes"}, {"id": approval.pk, "decline": True, "reason": "no"}):
        refusal = refused(task, alice, {"answers": [entry]})
        assert refusal.message == f"Approval #{approval.pk} is a tool call, not a question: approve or deny it."
    assert statuses(task) == ["pending"]


def test_the_owner_may_not_approve_a_call_that_needs_an_approver_but_may_deny_it(alice, ops_agent):
    task = a2a_task(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(task.conversation)
    assert approval.approver_required

    for parts in ({"decision_type": "approve"}, {"decisions": [{"id": approval.pk, "decision_type": "approve"}]},
                  {"approvals": [{"id": approval.pk, "approved": True}]}):
        refusal = refused(task, alice, parts)
        assert refusal.message == f"Approval #{approval.pk} needs an approver other than the requester (four eyes)."
    assert statuses(task) == ["pending"]

    assert send(task, alice, {"decision_type": "deny", "reason": "not now"}) == 1  # saying no needs no second pair of eyes
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "a2a", "not now")


def test_a_message_with_one_refused_decision_decides_none_of_the_others(alice, ops_agent):
    task = a2a_task(alice, ops_agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    refusal = refused(task, alice, {"decisions": [{"id": first.pk, "decision_type": "deny"},
                                                  {"id": second.pk, "decision_type": "approve"}]})

    assert "four eyes" in refusal.message
    assert statuses(task) == ["pending", "pending"]  # the deny before it was not decided either


def test_a_critical_call_is_approved_only_with_its_confirmation(alice, agent):
    task = a2a_task(alice, agent, "delete all files")
    [approval] = pending_approvals(task.conversation)
    assert (approval.risk, approval.confirmation_required, approval.confirmation_hint) == ("critical", True, "DELETE")
    [request] = data_parts(snapshot(task))["tool_approval"]["action_requests"]
    assert (request["confirmation_required"], request["confirmation_hint"]) == (True, "DELETE")

    for parts in ({"decision_type": "approve"}, {"decision_type": "approve", "confirmation": "delete"},
                  {"decisions": [{"id": approval.pk, "decision_type": "approve", "confirmation": "DELET"}]},
                  {"approvals": [{"id": approval.pk, "approved": True}]}):
        refusal = refused(task, alice, parts)
        assert refusal.message == f'Approval #{approval.pk} is critical: approve it with "confirmation": "DELETE".'
    assert statuses(task) == ["pending"]

    assert send(task, alice, {"decisions": [{"id": approval.pk, "decision_type": "approve", "confirmation": " DELETE "}]}) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "a2a", alice)
    assert runs.read(task).state == State.TASK_STATE_COMPLETED


# --- decisions.apply: what decides -------------------------------------------------------------------


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


# --- decisions bind to the version the client was sent ------------------------------------------------


def held_email_then_approved_on_the_page(task: Task, user) -> Approval:
    """The issue's sequence: while the pause the client was sent (write_file) waits, the owner types
    an email request in the chat (held until the call is decided), then approves the write on the
    page; the agent then asks for the email in the same turn. Returns the email's approval."""
    [write] = pending_approvals(task.conversation)
    services.post_message(conversation=Conversation.objects.get(pk=task.conversation_id), user=user,
                          content="email mallory@outside.test about the keys")
    decide(write.pk, user=user, approve=True, via="chat", shown_hash=write.shown_hash)
    [email] = pending_approvals(task.conversation)
    assert email.tool_call.name == "send_email"
    return email


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


def edit_as_if_by_an_approver(approval: Approval, arguments: dict) -> None:
    """An edit left pending for another decider, as approvals.services.approve_edited stores one."""
    Approval.objects.filter(pk=approval.pk).update(
        edited_arguments=arguments, edited_arguments_hash=arguments_hash(arguments), edited_at=timezone.now(),
        edited_by=User.objects.create_user("approver"),
    )


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


# --- runs: a task's state, read from the rows ----------------------------------------------------------


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


# --- The ASGI app, in process --------------------------------------------------------------------------


def call(method: str, path: str, *, token: str | None = None, headers: dict | None = None, **kwargs) -> httpx.Response:
    """One request to agentlink's ASGI app, as a client would send it (no server)."""
    return asgi_call(application, method, path, token=token, headers=headers, **kwargs)


def rpc(token: str, method: str, params: dict, *, slug: str = "demo", version: str | None = "1.0") -> dict:
    headers = {"A2A-Version": version} if version else {}
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    response = call("POST", f"/a2a/{slug}/", token=token, headers=headers, json=body)
    assert response.status_code == 200, response.text
    return response.json()


CARD = "/a2a/demo/.well-known/agent-card.json"


def test_a_request_without_a_valid_token_is_401_asking_for_a_bearer_token(alice, agent):
    ApiToken.issue(alice)
    for token, headers in ((None, {}), ("hitl_not-a-token", {}), ("", {}), (None, {"Authorization": "Basic YWxpY2U6YWxpY2U="})):
        response = call("GET", CARD, token=token, headers=headers)
        assert response.status_code == 401, (token, headers)
        assert response.headers["www-authenticate"] == "Bearer"
        assert "API token is required" in response.json()["detail"]
    assert call("POST", "/a2a/demo/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}).status_code == 401


def test_an_inactive_users_token_is_401(alice, agent):
    token = ApiToken.issue(alice)
    alice.is_active = False
    alice.save()

    assert call("GET", CARD, token=token).status_code == 401


def test_an_unknown_agent_and_one_not_granted_are_the_same_404(alice, agent):
    token = ApiToken.issue(alice)
    unknown = call("GET", "/a2a/nope/.well-known/agent-card.json", token=token)
    assert (unknown.status_code, unknown.json()["detail"]) == (404, "No such agent.")
    assert call("POST", "/a2a/nope/", token=token, json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}).status_code == 404

    agent.open_to_everyone = False
    agent.save()

    hidden = call("GET", CARD, token=token)
    assert (hidden.status_code, hidden.json()) == (404, unknown.json())
    assert call("GET", "/a2a/bad slug!/x", token=token).status_code == 404  # not an agent path at all


def test_a_body_over_the_cap_is_413_before_anything_reads_it(alice, agent):
    token = ApiToken.issue(alice)

    response = call("POST", "/a2a/demo/", token=token, content=b"x" * (MAX_BODY_BYTES + 1),
                    headers={"Content-Type": "application/json"})

    assert response.status_code == 413 and "over 1000000 bytes" in response.json()["detail"]
    assert not Conversation.objects.exists()


def test_a_body_without_a_content_length_is_411_and_nothing_runs(alice, agent):
    """A chunked body has no declared length to cap: it is refused before anything reads it."""
    token = ApiToken.issue(alice)

    async def chunks():
        for _ in range(3):
            yield b"x" * 400_000

    response = call("POST", "/a2a/demo/", token=token, content=chunks(),
                    headers={"Content-Type": "application/json", "A2A-Version": "1.0"})

    assert not Conversation.objects.exists()  # the body is refused either way: nothing ran
    assert response.status_code == 411, (response.status_code, response.text)


def test_a_host_not_in_allowed_hosts_is_400(alice, agent):
    token = ApiToken.issue(alice)

    response = call("GET", CARD, token=token, headers={"Host": "evil.example"})

    assert response.status_code == 400
    assert call("GET", CARD, token=token, headers={"Host": "127.0.0.1"}).status_code == 200


def test_the_card_has_the_bearer_scheme_and_the_agents_skills(alice, agent):
    response = call("GET", CARD, token=ApiToken.issue(alice))

    assert response.status_code == 200
    assert response.headers["x-content-type-options"] == "nosniff"
    card = response.json()
    assert card["name"] == agent.name
    assert card["supportedInterfaces"][0]["url"] == "http://localhost/a2a/demo/"
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    skills = {skill["id"]: skill for skill in card["skills"]}
    assert "may ask a human first" in skills["write_file"]["tags"]
    assert any(tag.startswith("risk:") for tag in skills["write_file"]["tags"])


def test_get_task_answers_the_owner_and_is_task_not_found_for_anyone_else(alice, mallory, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    mine = rpc(ApiToken.issue(alice), "GetTask", {"id": str(task.pk)})
    theirs = rpc(ApiToken.issue(mallory), "GetTask", {"id": str(task.pk)})
    nonsense = rpc(ApiToken.issue(mallory), "GetTask", {"id": "nope"})

    assert mine["result"]["id"] == str(task.pk)
    assert mine["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "result" not in theirs and theirs["id"] == 7
    assert theirs["error"]["code"] == -32001 and "not found" in theirs["error"]["message"].lower()
    assert nonsense["error"]["code"] == theirs["error"]["code"]


def test_the_0_3_method_names_apply_without_the_version_header(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    result = rpc(ApiToken.issue(alice), "tasks/get", {"id": str(task.pk)}, version=None)["result"]

    assert (result["kind"], result["status"]["state"]) == ("task", "input-required")


def test_a_refused_decision_over_json_rpc_is_invalid_params_with_who_decided(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    token = ApiToken.issue(alice)
    bad = {"message": {"role": "ROLE_USER", "messageId": "m1", "taskId": str(task.pk),
                       "parts": [{"data": {"decision_type": "maybe"}}]}}

    refusal = rpc(token, "SendMessage", bad)

    assert refusal["error"]["code"] == -32602 and '"decision_type" is "approve" or "deny".' in refusal["error"]["message"]
    assert statuses(task) == ["pending"]

    decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash)
    late = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk),
                        "parts": [{"data": {"decisions": [{"id": approval.pk, "decision_type": "approve"}]}}]}}
    after = rpc(token, "SendMessage", late)
    assert after["error"]["code"] == -32602
    assert f"Approval #{approval.pk} was already rejected by alice via api." in after["error"]["message"]
    [info] = after["error"]["data"]  # the SDK carries Refused.data as a google.rpc.ErrorInfo's metadata
    assert info["metadata"] == {"id": approval.pk, "status": "rejected", "decided_by": "alice", "decided_via": "api"}


def test_send_message_starts_a_task_that_pauses_and_a_decision_completes_it(alice, agent):
    token = ApiToken.issue(alice)
    start = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "write hello to a.txt"}]}}

    paused = rpc(token, "SendMessage", start)["result"]["task"]

    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task = Task.objects.get(pk=paused["id"])
    [approval] = pending_approvals(task.conversation)
    decision = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": paused["id"],
                            "parts": [{"data": {"decisions": [{"id": approval.pk, "decision_type": "approve"}]}}]}}
    done = rpc(token, "SendMessage", decision)["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][-1]["parts"][0]["text"] == "I did write a.txt: Wrote 5 bytes to a.txt."
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "a2a")



def test_subscribing_to_a_task_that_is_over_is_the_specifications_unsupported_operation(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, {"decision_type": "approve"})
    body = {"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": str(task.pk)}}

    response = call("POST", "/a2a/demo/", token=ApiToken.issue(alice), headers={"A2A-Version": "1.0"}, json=body)

    text = response.text
    assert response.status_code == 200 and '"code":-32004' in text.replace(" ", "") and "nothing to subscribe to" in text, text


def test_a_message_on_a_task_that_is_over_is_refused_and_says_to_start_a_new_one(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, {"decision_type": "approve"})
    later = {"message": {"role": "ROLE_USER", "messageId": "m3", "taskId": str(task.pk), "parts": [{"text": "read a.txt"}]}}

    refusal = rpc(ApiToken.issue(alice), "SendMessage", later)

    assert refusal["error"]["code"] == -32004  # UnsupportedOperationError: the specification's for a terminal task
    assert refusal["error"]["message"] == (
        f"Task {task.pk} is completed: it takes no decision now; send a new message with its contextId and no taskId.")
    assert Task.objects.filter(conversation_id=task.conversation_id).count() == 1


def test_cancel_task_is_the_stop_and_list_tasks_shows_only_the_callers_own(alice, mallory, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)

    listed = rpc(token, "ListTasks", {})["result"]
    assert [t["id"] for t in listed["tasks"]] == [str(task.pk)]
    assert rpc(ApiToken.issue(mallory), "ListTasks", {})["result"].get("tasks", []) == []
    assert rpc(ApiToken.issue(mallory), "CancelTask", {"id": str(task.pk)})["error"]["code"] == -32001

    canceled = rpc(token, "CancelTask", {"id": str(task.pk)})["result"]

    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert Task.objects.get(pk=task.pk).canceled
    approval = Approval.objects.get(conversation_id=task.conversation_id)
    assert (approval.status, approval.decided_via) == ("cancelled", "a2a")
    assert rpc(token, "CancelTask", {"id": str(task.pk)})["error"]["code"] == -32002  # over: not cancelable



# --- Under load and bad input ---------------------------------------------------------------------------


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


def many_finished_tasks(user, agent, count: int) -> Conversation:
    """`count` completed tasks in one conversation, written straight to the table (fast)."""
    conversation = Conversation.objects.create(owner=user, agent=agent)
    Task.objects.bulk_create(
        Task(conversation=conversation, position=n, end_position=n + 1, final_state=Task.FinalState.COMPLETED)
        for n in range(1, count + 1)
    )
    return conversation


def test_list_tasks_filtered_by_state_pages_in_the_database_past_the_newest_500(alice, agent, django_assert_max_num_queries):
    paused = a2a_task(alice, agent, "write hello to a.txt")  # the oldest task: 600 newer ones follow
    many_finished_tasks(alice, agent, 600)
    token = ApiToken.issue(alice)

    waiting = rpc(token, "ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"})["result"]
    pages, following = [], ""
    while following or not pages:
        page = rpc(token, "ListTasks", {"status": "TASK_STATE_COMPLETED", "pageSize": 100, "pageToken": following})["result"]
        pages.append(page)
        following = page.get("nextPageToken", "")

    assert [t["id"] for t in waiting["tasks"]] == [str(paused.pk)] and waiting["totalSize"] == 1
    assert [len(page["tasks"]) for page in pages] == [100] * 6 and {page["totalSize"] for page in pages} == {600}
    assert len({t["id"] for page in pages for t in page["tasks"]}) == 600  # each once
    with django_assert_max_num_queries(40):  # the page's reads, not the 600 tasks'
        handler._list_tasks(pb.ListTasksRequest(status=State.TASK_STATE_INPUT_REQUIRED), alice, agent)
    first, last = (pb.ListTasksRequest(status=State.TASK_STATE_COMPLETED, page_size=100, page_token=page_token)
                   for page_token in ("", pages[-2]["nextPageToken"]))
    with CaptureQueriesContext(connection) as on_first:
        handler._list_tasks(first, alice, agent)
    with CaptureQueriesContext(connection) as on_last:
        handler._list_tasks(last, alice, agent)
    assert len(on_last) == len(on_first)  # a cursor, not an offset: the last page costs what the first does
    assert not any("OFFSET" in query["sql"] for query in on_last.captured_queries)


def test_list_tasks_filtered_by_status_time_keeps_the_tasks_that_moved_since(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    moved = Conversation.objects.get(pk=task.conversation_id).updated_at
    token = ApiToken.issue(alice)

    def listed(after) -> list[str]:
        stamp = after.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return [t["id"] for t in rpc(token, "ListTasks", {"statusTimestampAfter": stamp})["result"].get("tasks", [])]

    assert listed(moved - timedelta(seconds=1)) == [str(task.pk)]
    assert listed(moved) == [str(task.pk)]  # at or after: "greater than or equal to", as the specification says
    assert listed(moved + timedelta(microseconds=1)) == []


def test_a_page_token_past_any_page_is_invalid_params_not_a_database_error(alice, agent):
    a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)

    for page_token in (str(2**70), str(2**63), "-1", "x"):
        for params in ({"pageToken": page_token}, {"pageToken": page_token, "status": "TASK_STATE_INPUT_REQUIRED"}):
            error = rpc(token, "ListTasks", params)["error"]
            assert (error["code"], error["message"]) == (-32602, "pageToken is the nextPageToken of an earlier page."), params


def test_an_internal_error_says_internal_error_with_an_id_that_the_log_carries(alice, agent, caplog):
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)
    with connection.cursor() as cursor:  # the database loses a table under the running server
        cursor.execute("ALTER TABLE approvals_approval RENAME TO approvals_approval_gone")
    try:
        error = rpc(token, "GetTask", {"id": str(task.pk)})["error"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE approvals_approval_gone RENAME TO approvals_approval")

    error_id = error["message"].removeprefix("internal error (id ").removesuffix(")")
    assert error["code"] == -32603 and error["message"] == f"internal error (id {error_id})" and len(error_id) == 12
    assert "approvals_approval" not in str(error)  # the database's words stay in the log
    [logged] = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged.exc_info and "approvals_approval" in str(logged.exc_info[1])


def test_calls_over_the_per_token_cap_get_a_too_many_error_with_retry_advice(alice, agent, settings):
    task = a2a_task(alice, agent, "write hello to a.txt")
    settings.HITL_A2A_CALLS_PER_TOKEN = 0
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": str(task.pk)}}

    response = call("POST", "/a2a/demo/", token=ApiToken.issue(alice), headers={"A2A-Version": "1.0"}, json=body)

    assert response.status_code == 200 and response.headers["retry-after"] == "1"
    error = response.json()["error"]
    assert response.json()["id"] == 7 and error["code"] == limits.TOO_MANY
    assert "retry in 1 s" in error["message"]
    assert error["data"] == {"retry_after_seconds": 1, "limit": 0, "kind": "calls"}


def test_a_token_holds_at_most_its_cap_of_calls_and_of_streams_at_once_and_others_are_not_counted(settings):
    """limits.Throttle around an app whose answers wait until the test lets them go."""
    settings.HITL_A2A_CALLS_PER_TOKEN, settings.HITL_A2A_STREAMS_PER_TOKEN = 2, 1
    release = asyncio.Event()

    async def slow_app(scope, receive, send):
        message = await receive()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": message["body"]})

    throttle = limits.Throttle(slow_app)

    async def request(token: str, method: str) -> tuple[int, bytes]:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method}).encode()
        scope = {"type": "http", "method": "POST", "path": "/a2a/demo/", "headers": [], "hitl_token": token}
        chunks = iter([{"type": "http.request", "body": body[:10], "more_body": True},
                       {"type": "http.request", "body": body[10:], "more_body": False}])
        sent = []

        async def receive():
            return next(chunks, {"type": "http.disconnect"})

        async def send(message):
            sent.append(message)

        await throttle(scope, receive, send)
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    async def scenario():
        held = [asyncio.create_task(request("t1", "GetTask")) for _ in range(2)]
        held.append(asyncio.create_task(request("t1", "SubscribeToTask")))
        held.append(asyncio.create_task(request("t2", "GetTask")))  # another token: its own count
        await asyncio.sleep(0.05)
        over_calls = await request("t1", "ListTasks")
        over_streams = await request("t1", "message/stream")
        release.set()
        answered = await asyncio.gather(*held)
        return over_calls, over_streams, answered, dict(throttle.held["calls"]), dict(throttle.held["streams"])

    over_calls, over_streams, answered, calls_left, streams_left = asyncio.run(scenario())

    assert json.loads(over_calls[1])["error"]["data"]["kind"] == "calls"
    assert json.loads(over_streams[1])["error"]["data"] == {"retry_after_seconds": 1, "limit": 1, "kind": "streams"}
    assert all(status == 200 and b'"method"' in body for status, body in answered)  # the body handed on whole
    assert calls_left == streams_left == {}  # every slot given back


def test_a2a_answers_while_the_thread_the_sockets_share_is_busy(alice, agent):
    """asgiref's one shared thread (what database_sync_to_async uses outside a request context, as
    the websocket consumers do) blocked: A2A still answers, on its own threads."""
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)
    blocked, started = threading.Event(), threading.Event()

    def hold():
        started.set()
        blocked.wait(30)

    shared = SyncToAsync.single_thread_executor.submit(hold)
    started.wait(5)
    try:
        began = time.monotonic()
        answer = rpc(token, "GetTask", {"id": str(task.pk)})
        took = time.monotonic() - began
    finally:
        blocked.set()
        shared.result(5)

    assert answer["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert took < 5


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


# --- Routed calls: a vote toward a quorum is not an approval ------------------------------------------


@pytest.fixture
def finance_route(ops_agent):
    """The ops agent's emails go to the finance group (dana and erin), two of whom must approve."""
    _, members = finance_group()
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)
    return members


def test_an_approve_below_the_quorum_is_a_vote_the_task_still_waits_and_the_reply_says_it_is_counted(alice, ops_agent, finance_route):
    dana, erin = finance_route
    task = a2a_task(alice, ops_agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(task.conversation)
    assert approval.quorum == 2

    outcome = apply(task, dana, {"decision_type": "approve"})

    assert (outcome.decided, outcome.voted) == (1, [approval])
    assert statuses(task) == ["pending"]
    vote = approval.votes.get()
    assert (vote.user, vote.via) == (dana, "a2a")
    assert decisions.notice(outcome) == (
        f"Your approval of #{approval.pk} send_email is counted: 1 of 2 approvals: dana. It is still pending: 1 more must approve it."
    )
    assert sent(task).status.state == State.TASK_STATE_INPUT_REQUIRED
    assert "already voted" in refused(task, dana, {"decision_type": "approve"}).message

    # The handler's answer to the reply: the same words, over a task that still waits.
    sent(task)
    assert handler._continue(task, erin, message({"decision_type": "approve"})) == ""
    assert statuses(task) == ["approved"]
    approval.refresh_from_db()
    assert (approval.decided_by, approval.decided_via) == (erin, "a2a")


def test_the_handler_answers_a_vote_with_the_count_and_the_call_pending(alice, ops_agent, finance_route):
    dana, _ = finance_route
    task = a2a_task(alice, ops_agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(task.conversation)

    notice = handler._continue(task, dana, message({"decisions": [{"id": approval.pk, "decision_type": "approve"}]}))

    assert notice.startswith(f"Your approval of #{approval.pk} send_email is counted: 1 of 2 approvals: dana.")
    assert MessageToDict(sent(task))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_the_owner_may_not_approve_a_routed_call_and_is_told_it_is_routed(alice, ops_agent, finance_route):
    task = a2a_task(alice, ops_agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(task.conversation)

    refusal = refused(task, alice, {"decision_type": "approve"})

    assert refusal.message == f"Approval #{approval.pk} is routed: only members of its approver groups decide it, never its requester."
    assert statuses(task) == ["pending"] and not approval.votes.exists()


def test_negative_page_sizes_and_history_lengths_and_unknown_states_are_invalid_params(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)
    refused = [
        rpc(token, "ListTasks", {"pageSize": -1}),
        rpc(token, "ListTasks", {"historyLength": -2}),
        rpc(token, "ListTasks", {"status": 99}),
        rpc(token, "GetTask", {"id": str(task.pk), "historyLength": -1}),
    ]
    assert [answer.get("error", {}).get("code") for answer in refused] == [-32602] * 4, refused
    assert rpc(token, "ListTasks", {"pageSize": 0})["result"]["tasks"]  # 0: the default size


# --- A2A as the specification says (issue 36 item 8): lists, content types, the card's caching ------


def listed_ids(token: str, **params) -> list[str]:
    return [task["id"] for task in rpc(token, "ListTasks", params)["result"].get("tasks", [])]


def stamp(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def status_time(task: Task):
    return sent(Task.objects.get(pk=task.pk)).status.timestamp.ToDatetime(tzinfo=UTC)


def test_list_tasks_puts_the_most_recently_updated_task_first_not_the_newest(alice, agent):
    paused = a2a_task(alice, agent, "write hello to a.txt")
    later = a2a_task(alice, agent, "what is 2 + 2")
    token = ApiToken.issue(alice)
    assert listed_ids(token) == [str(later.pk), str(paused.pk)]

    send(paused, alice, {"decision_type": "approve"})  # the older task moves: it completes now

    assert listed_ids(token) == [str(paused.pk), str(later.pk)]
    assert status_time(paused) > status_time(later)


def test_a_task_that_moves_between_two_pages_is_not_shown_twice_and_shifts_no_other(alice, agent):
    oldest = a2a_task(alice, agent, "write hello to a.txt")
    b, c, d, e = (a2a_task(alice, agent, f"what is {n} + {n}") for n in (2, 3, 4, 5))
    token = ApiToken.issue(alice)
    first = rpc(token, "ListTasks", {"pageSize": 2})["result"]

    send(oldest, alice, {"decision_type": "approve"})  # an offset would now show d again and never c
    second = rpc(token, "ListTasks", {"pageSize": 2, "pageToken": first["nextPageToken"]})["result"]

    assert [t["id"] for t in first["tasks"]] == [str(e.pk), str(d.pk)]
    assert [t["id"] for t in second["tasks"]] == [str(c.pk), str(b.pk)]
    assert (second["totalSize"], second.get("nextPageToken", "")) == (5, "")  # the moved task is ahead of the cursor now
    assert listed_ids(token, pageSize=2) == [str(oldest.pk), str(e.pk)]  # and first in a listing from the top


def test_a_page_token_not_given_for_this_listing_is_invalid_params(alice, mallory, agent):
    for n in (2, 3, 4):
        a2a_task(alice, agent, f"what is {n} + {n}")
        a2a_task(mallory, agent, f"what is {n} + {n}")
    alices, mallorys = ApiToken.issue(alice), ApiToken.issue(mallory)
    page_token = rpc(alices, "ListTasks", {"pageSize": 1})["result"]["nextPageToken"]
    assert page_token and not page_token.isdigit()  # a position, not an offset

    foreign = [
        rpc(mallorys, "ListTasks", {"pageSize": 1, "pageToken": page_token}),  # another user's
        rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": page_token, "status": "TASK_STATE_COMPLETED"}),  # another filter's
        rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": page_token[:-2] + ("AA" if page_token[-2:] != "AA" else "BB")}),
        rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": "1"}),  # the old offsets
    ]

    assert [(answer["error"]["code"], answer["error"]["message"]) for answer in foreign] == [
        (-32602, "pageToken is the nextPageToken of an earlier page.")] * 4
    assert len(rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": page_token})["result"]["tasks"]) == 1


def test_a_task_over_keeps_its_status_time_and_the_time_filter_reads_that_at_or_after(alice, agent):
    closed = a2a_task(alice, agent, "what is 3 + 3")
    settled = status_time(closed)
    current = a2a_task(alice, agent, "what is 4 + 4", conversation=Conversation.objects.get(pk=closed.conversation_id))
    token = ApiToken.issue(alice)

    assert Task.objects.get(pk=closed.pk).final_state == Task.FinalState.COMPLETED
    assert status_time(closed) == settled < Conversation.objects.get(pk=closed.conversation_id).updated_at
    assert listed_ids(token, statusTimestampAfter=stamp(settled)) == [str(current.pk), str(closed.pk)]  # at: included
    assert listed_ids(token, statusTimestampAfter=stamp(settled + timedelta(microseconds=1))) == [str(current.pk)]
    assert rpc(token, "ListTasks", {})["result"]["tasks"][1]["status"]["timestamp"] == stamp(settled)


def test_list_tasks_leaves_out_the_artifacts_unless_asked(alice, agent):
    a2a_task(alice, agent, "what is 2 + 2")
    token = ApiToken.issue(alice)

    [bare] = rpc(token, "ListTasks", {})["result"]["tasks"]
    [full] = rpc(token, "ListTasks", {"includeArtifacts": True})["result"]["tasks"]

    assert "artifacts" not in bare
    assert [artifact["name"] for artifact in full["artifacts"]][-1] == "answer"


def test_a_new_task_with_a_data_or_file_part_is_content_type_not_supported_and_the_card_says_text(alice, agent):
    token = ApiToken.issue(alice)
    parts = ([{"text": "hello"}, {"data": {"decision_type": "approve"}}], [{"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}],
             [{"raw": "aGVsbG8=", "mediaType": "image/png"}])

    refusals = [rpc(token, "SendMessage", {"message": {"role": "ROLE_USER", "messageId": f"m{n}", "parts": part}})["error"]
                for n, part in enumerate(parts)]

    assert [refusal["code"] for refusal in refusals] == [-32005] * 3, refusals
    assert "a file part (application/pdf)" in refusals[1]["message"] and "text/plain" in refusals[1]["message"]
    assert not Conversation.objects.exists()
    card = call("GET", CARD, token=token).json()
    assert card["defaultInputModes"] == ["text/plain"]
    assert not any("inputModes" in skill for skill in card["skills"])


def test_the_card_is_cached_privately_with_an_etag_and_a_matching_one_is_304(alice, agent):
    token = ApiToken.issue(alice)
    first = call("GET", CARD, token=token)
    etag = first.headers["etag"]

    again = call("GET", CARD, token=token, headers={"If-None-Match": f'W/"other", {etag}'})
    stale = call("GET", CARD, token=token, headers={"If-None-Match": '"other"'})
    agent.tools = agent.tools[:-1]  # a tool fewer: another card
    agent.save()
    changed = call("GET", CARD, token=token, headers={"If-None-Match": etag})

    assert first.status_code == 200 and etag.startswith('"') and len(etag) == 34
    assert (first.headers["cache-control"], first.headers["vary"]) == ("private, max-age=300", "Authorization")
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    assert again.headers["cache-control"] == "private, max-age=300"
    assert (stale.status_code, stale.json()) == (200, first.json())
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    answer = call("POST", "/a2a/demo/", token=token, headers={"A2A-Version": "1.0"},
                  json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
    assert answer.headers.get_list("cache-control") == ["no-store"]  # JSON-RPC answers are never kept
    assert call("GET", CARD).headers.get_list("cache-control") == ["no-store"]  # nor a refusal on the card's path
