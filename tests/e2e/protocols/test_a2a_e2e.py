"""Agents over A2A end to end: the real `a2a-sdk` client against daphne, the loop in a real Celery
worker, decisions through the same service as the chat."""
import httpx
import pytest
from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError, TaskNotFoundError
from approvals.models import Approval
from chat.models import ApiToken, Conversation, OutboxEmail
from tests.conftest import wait_until
from tests.e2e.a2a_client import State, answer_of, data_parts, text_of
from tests.e2e.chat.test_api_e2e import wait_for_status

pytestmark = pytest.mark.e2e


def test_the_card_names_the_skills_and_the_bearer_scheme_and_is_only_for_those_who_may_use_the_agent(e2e, a2a, alice, agent):
    response = a2a(alice).card()
    assert response.status_code == 200
    card = response.json()
    assert card["name"] == agent.name
    assert card["supportedInterfaces"][0]["url"] == f"{e2e.base_url}/a2a/demo/"
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    skills = {skill["id"]: skill for skill in card["skills"]}
    assert "write_file" in skills and "may ask a human first" in skills["write_file"]["tags"]

    assert httpx.get(f"{e2e.base_url}/a2a/demo/.well-known/agent-card.json").status_code == 401
    assert a2a(alice, slug="nope").card().status_code == 404
    agent.open_to_everyone = False
    agent.save()
    assert a2a(alice).card().status_code == 404  # not granted: as unknown as an agent that is not there


def test_a_gated_write_is_input_required_then_approved_with_a_data_part_then_completed(e2e, a2a, alice, agent):
    client = a2a(alice)
    task = client.task("write hello to a.txt")

    assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
    parts = data_parts(task)
    [request] = parts["tool_approval"]["action_requests"]
    approval = Approval.objects.get(pk=int(request["id"]))
    assert (request["name"], request["args"]) == ("write_file", {"path": "a.txt", "content": "hello"})
    assert MessageToDict(task.status.message)["metadata"]["interrupt_type"] == "tool_approval"
    [tool] = parts["tool_approval_request"]["tools"]
    assert (tool["id"], tool["call_id"], tool["name"]) == (approval.pk, approval.tool_call.call_id, "write_file")
    assert "write_file" in text_of(task)
    assert task.context_id == str(approval.conversation_id)

    done = client.task({"decision_type": "approve"}, task_id=task.id)

    assert done.status.state == State.TASK_STATE_COMPLETED
    assert answer_of(done) == "I did write a.txt: Wrote 5 bytes to a.txt."
    assert (e2e.sandbox_root / task.context_id / "a.txt").read_text() == "hello"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "a2a", alice)
    assert client.get(task.id).status.state == State.TASK_STATE_COMPLETED  # read from the rows

    follow_up = client.task("read a.txt", context_id=task.context_id)  # the same context: the next turn
    assert follow_up.id != task.id and follow_up.context_id == task.context_id
    assert follow_up.status.state == State.TASK_STATE_COMPLETED
    assert {t.id for t in client.list(context_id=task.context_id).tasks} == {task.id, follow_up.id}


def test_two_deletes_one_approved_one_denied_with_a_reason_quoted_in_the_answer(e2e, a2a, alice, agent):
    client = a2a(alice)
    first = client.task("write one to a.txt")
    client.task({"decision_type": "approve"}, task_id=first.id)
    task = client.task("delete a.txt and b.txt", context_id=first.context_id)
    requests = data_parts(task)["tool_approval"]["action_requests"]
    assert [r["args"]["path"] for r in requests] == ["a.txt", "b.txt"]
    keep, drop = (int(r["id"]) for r in requests)

    done = client.task(
        {"decisions": [{"id": keep, "decision_type": "deny", "reason": "keep a.txt, it has the notes"},
                       {"id": drop, "decision_type": "approve"}]},
        task_id=task.id,
    )

    assert done.status.state == State.TASK_STATE_COMPLETED
    assert "keep a.txt, it has the notes" in answer_of(done)
    assert Approval.objects.get(pk=keep).rejection_reason == "keep a.txt, it has the notes"
    assert Approval.objects.get(pk=drop).status == "approved"


def test_a_decision_made_in_the_chat_first_is_refused_over_a2a_naming_who_decided(e2e, a2a, api_for, alice, agent):
    client = a2a(alice)
    task = client.task("write hello to a.txt")
    approval_id = int(data_parts(task)["tool_approval"]["action_requests"][0]["id"])
    assert api_for(alice).post(f"approvals/{approval_id}/decision", {"decision": "reject", "reason": "no"}).status_code == 200

    with pytest.raises(A2AError) as refused:
        client.task({"decisions": [{"id": approval_id, "decision_type": "approve"}]}, task_id=task.id)

    assert f"Approval #{approval_id} was already rejected by alice via api" in str(refused.value)
    assert Approval.objects.get(pk=approval_id).decided_via == "api"  # the first decision stands


def test_kagent_tool_approval_response_and_a_stream_of_the_run(e2e, a2a, alice, agent):
    client = a2a(alice, streaming=True)
    events = client.send("write hello to a.txt")
    assert events[0].HasField("task")
    last = events[-1].status_update.status if events[-1].HasField("status_update") else events[-1].task.status
    assert last.state == State.TASK_STATE_INPUT_REQUIRED
    task_id = events[0].task.id
    approval = Approval.objects.get(conversation_id=events[0].task.context_id)

    events = client.send({"type": "tool_approval_response", "approvals": [{"id": approval.pk, "approved": True}]}, task_id=task_id)

    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[-1] == State.TASK_STATE_COMPLETED
    [artifact] = [e.artifact_update.artifact for e in events if e.HasField("artifact_update") and e.artifact_update.artifact.name == "answer"]
    assert artifact.parts[0].text == "I did write a.txt: Wrote 5 bytes to a.txt."


def test_cancel_is_the_stop(e2e, a2a, alice, agent):
    client = a2a(alice)
    task = client.task("write hello to a.txt")
    approval = Approval.objects.get(conversation_id=task.context_id)

    canceled = client.cancel(task.id)

    assert canceled.status.state == State.TASK_STATE_CANCELED
    assert "Stopped by alice" in text_of(canceled)
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("cancelled", "a2a")
    wait_for_status(task.context_id, "idle")
    assert client.get(task.id).status.state == State.TASK_STATE_CANCELED
    with pytest.raises(A2AError):
        client.cancel(task.id)  # over: nothing to cancel


def test_another_users_token_sees_neither_the_task_nor_the_context(e2e, a2a, alice, mallory, agent):
    task = a2a(alice).task("write hello to a.txt")
    intruder = a2a(mallory)

    for attempt in (
        lambda: intruder.get(task.id),
        lambda: intruder.cancel(task.id),
        lambda: intruder.task({"decision_type": "approve"}, task_id=task.id),
        lambda: intruder.task("read a.txt", context_id=task.context_id),
    ):
        with pytest.raises(TaskNotFoundError) as refused:
            attempt()
        assert "not found" in str(refused.value).lower()
    assert intruder.list().tasks == []
    assert Approval.objects.get(conversation_id=task.context_id).status == "pending"


def test_the_0_3_method_names_and_state_spelling(e2e, alice, agent):
    headers = {"Authorization": f"Bearer {ApiToken.issue(alice)}"}
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": {"role": "user", "messageId": "m1", "kind": "message", "parts": [{"kind": "text", "text": "write hello to a.txt"}]}},
    }
    result = httpx.post(f"{e2e.base_url}/a2a/demo/", json=body, headers=headers, timeout=30).json()["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "input-required")
    data = [part["data"] for part in result["status"]["message"]["parts"] if part["kind"] == "data"]
    assert data[0]["action_requests"][0]["name"] == "write_file"

    decision = {
        "jsonrpc": "2.0", "id": 2, "method": "message/send",
        "params": {"message": {"role": "user", "messageId": "m2", "kind": "message", "taskId": result["id"],
                               "parts": [{"kind": "data", "data": {"decision_type": "approve"}}]}},
    }
    done = httpx.post(f"{e2e.base_url}/a2a/demo/", json=decision, headers=headers, timeout=30).json()["result"]
    assert done["status"]["state"] == "completed"
    wait_until(lambda: Conversation.objects.get(pk=result["contextId"]).status == "idle", message="idle")


def test_a_question_goes_out_as_ask_user_request_and_its_answer_comes_back(e2e, a2a, alice, agent):
    client = a2a(alice)
    task = client.task("ask me to choose between tea, coffee and water")
    [question] = data_parts(task)["ask_user_request"]["questions"]
    assert (question["type"], question["options"]) == ("choice", ["tea", "coffee", "water"])

    with pytest.raises(A2AError) as refused:
        client.task({"answers": [{"id": question["id"], "answer": "beer"}]}, task_id=task.id)
    assert "Choose one of: tea, coffee, water." in str(refused.value)
    done = client.task({"answers": [{"id": question["id"], "answer": "coffee"}]}, task_id=task.id)

    assert (done.status.state, answer_of(done)) == (State.TASK_STATE_COMPLETED, "You answered: coffee.")


def test_plain_text_follows_the_chats_typed_decision_rules(e2e, a2a, alice, agent):
    client = a2a(alice)
    task = client.task("write hello to a.txt")

    unclear = client.task("hmm, maybe", task_id=task.id)
    assert unclear.status.state == State.TASK_STATE_INPUT_REQUIRED
    assert text_of(unclear).startswith("Your message will be answered once the pending calls are decided.")
    done = client.task("yes", task_id=task.id)

    assert done.status.state == State.TASK_STATE_COMPLETED
    approval = Approval.objects.get(conversation_id=task.context_id)
    assert (approval.status, approval.decided_via) == ("approved", "text")


def test_a_blanket_approve_never_approves_a_call_that_the_pause_it_answers_did_not_list(e2e, a2a, api_for, alice, agent):
    """The issue's sequence: the pause shows write_file; it is approved elsewhere (the API, as the page
    would); the agent then asks for send_email; the client's reply to the pause it saw must not send it."""
    client, api = a2a(alice), api_for(alice)
    task = client.task("write hello to a.txt")
    [write] = data_parts(task)["tool_approval"]["action_requests"]
    assert write["name"] == "write_file" and write["shown_hash"]
    held = api.post(f"conversations/{task.context_id}/messages", {"content": "email mallory@outside.test about the keys"})
    assert held.status_code == 202, held.text
    approved = api.post(f"approvals/{int(write['id'])}/decision", {"decision": "approve", "shown_hash": write["shown_hash"]})
    assert approved.status_code == 200, approved.text
    email = wait_until(lambda: Approval.objects.filter(conversation_id=task.context_id, status="pending").first(),
                       message="the agent to ask for the email")
    assert email.tool_call.name == "send_email"

    with pytest.raises(A2AError) as refused:
        client.task({"decision_type": "approve"}, task_id=task.id)  # the reply to the pause it saw

    assert f"#{email.pk} send_email came after it" in str(refused.value)
    email.refresh_from_db()
    assert email.status == "pending" and not OutboxEmail.objects.exists()

    seen = client.get(task.id)  # the pause that lists it, then a reply to that one
    [request] = data_parts(seen)["tool_approval"]["action_requests"]
    assert (int(request["id"]), request["name"], request["shown_hash"]) == (email.pk, "send_email", email.shown_hash)
    done = client.task({"decision_type": "deny", "reason": "not to outsiders"}, task_id=task.id)
    assert done.status.state == State.TASK_STATE_COMPLETED
    email.refresh_from_db()
    assert (email.status, email.decided_via, email.rejection_reason) == ("rejected", "a2a", "not to outsiders")


def test_an_approvers_edit_is_approved_over_a2a_only_with_the_shown_hash_of_the_pause_that_showed_it(e2e, a2a, api_for, alice, bob, agent):
    client = a2a(alice)
    task = client.task("write hello to a.txt")
    [request] = data_parts(task)["tool_approval"]["action_requests"]
    approval_id, requested = int(request["id"]), request["shown_hash"]
    edited = {"path": "a.txt", "content": "hel\u200blo"}  # a riskier version: it stays pending for a decider
    answer = api_for(bob).post(f"approvals/{approval_id}/decision", {"decision": "approve", "arguments": edited, "shown_hash": requested})
    assert answer.status_code == 200 and answer.json()["status"] == "pending", answer.text

    for stale in ({}, {"shown_hash": requested}):
        with pytest.raises(A2AError) as refused:
            client.task({"decisions": [{"id": approval_id, "decision_type": "approve"} | stale]}, task_id=task.id)
        assert "changed" in str(refused.value)
    assert Approval.objects.get(pk=approval_id).status == "pending"
    assert not (e2e.sandbox_root / task.context_id / "a.txt").exists()

    [shown] = data_parts(client.get(task.id))["tool_approval"]["action_requests"]
    assert shown["args"] == edited and shown["shown_hash"] != requested
    done = client.task({"decisions": [{"id": approval_id, "decision_type": "approve", "shown_hash": shown["shown_hash"]}]}, task_id=task.id)

    assert done.status.state == State.TASK_STATE_COMPLETED
    assert (e2e.sandbox_root / task.context_id / "a.txt").read_text() == "hel\u200blo"
