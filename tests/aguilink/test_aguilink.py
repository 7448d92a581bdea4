"""Agents over AG-UI, in process (aguilink): a run's events from the rows, a pause as interrupts with
their answer's schema, resume entries decided through the decision service (via agui) and checked
first, threads scoped to their owner, and the ASGI app's gate (token or same-origin session, agent,
body, input). The loop runs inline with the scripted model (eager Celery), so a run that starts a turn
finds it paused or over; tests/e2e/protocols/test_agui_e2e.py drives the same through daphne and a worker."""
import json
from datetime import timedelta

import httpx
import pytest
from django.test import Client
from django.utils import timezone

from aguilink.app import MAX_BODY_BYTES, application
from approvals.models import Approval
from chat import services
from chat.models import ApiToken, Conversation, Message, ToolCall
from tests.conftest import asgi_call, pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


# --- Helpers -----------------------------------------------------------------------------------------


def call(method: str, path: str, *, token: str | None = None, headers: dict | None = None, **kwargs) -> httpx.Response:
    """One request to aguilink's ASGI app, as a client would send it (no server)."""
    return asgi_call(application, method, path, token=token, headers=headers, **kwargs)


def events_of(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [frame for frame in response.text.split("\n\n") if frame.strip()]
    return [json.loads(frame.removeprefix("data: ")) for frame in frames]


def run(token: str, *, thread: str = "thread-1", text: str | None = None, resume: list | None = None,
        slug: str = "demo", headers: dict | None = None) -> list[dict]:
    """One AG-UI run: its events, in order."""
    body = {"threadId": thread, "runId": f"run-{thread}", "messages": [], "tools": [], "context": [], "state": {}}
    if text is not None:
        body["messages"] = [{"id": "m-1", "role": "user", "content": text}]
    if resume is not None:
        body["resume"] = resume
    # Sent as json.dumps writes it (ASCII, escapes kept): a lone surrogate is valid JSON, if no text.
    return events_of(call("POST", f"/agui/{slug}/", token=token, content=json.dumps(body),
                          headers={"Content-Type": "application/json", **(headers or {})}))


def last(events: list[dict]) -> dict:
    return events[-1]


def types(events: list[dict]) -> list[str]:
    return [event["type"] for event in events]


def interrupts(events: list[dict]) -> list[dict]:
    finished = last(events)
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt", finished
    return finished["outcome"]["interrupts"]


def approve(approval_id, **payload) -> list[dict]:
    return [{"interruptId": str(approval_id), "status": "resolved", "payload": {"decision": "approve", **payload}}]


def thread_of(user, thread: str = "thread-1") -> Conversation:
    return Conversation.objects.get(owner=user, external_thread=thread)


# --- A run: a turn, its pause as interrupts, and what resumes it -------------------------------------------


def test_a_gated_write_ends_the_run_with_an_interrupt_for_its_approval_and_the_schema_of_the_answer(alice, agent):
    token = ApiToken.issue(alice)

    events = run(token, text="write hello to a.txt")

    assert types(events)[0] == "RUN_STARTED" and events[0]["threadId"] == "thread-1"
    [approval] = pending_approvals(thread_of(alice))
    call_id = approval.tool_call.call_id
    assert [e for e in events if e["type"].startswith("TOOL_CALL")] == [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": "write_file",
         "parentMessageId": f"{approval.conversation_id}-{approval.tool_call.message.position}"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": json.dumps({"path": "a.txt", "content": "hello"})},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]
    [interrupt] = interrupts(events)
    assert (interrupt["id"], interrupt["reason"], interrupt["toolCallId"]) == (str(approval.pk), "tool_approval", call_id)
    assert interrupt["message"].startswith("Approve? Write a.txt (5 bytes) — asked by alice (")
    assert interrupt["preview"] == approval.preview and interrupt["preview"]  # the diff a human reads
    assert interrupt["metadata"]["shownHash"] == approval.shown_hash
    assert interrupt["metadata"]["arguments"] == {"path": "a.txt", "content": "hello"}
    schema = interrupt["responseSchema"]
    assert schema["required"] == ["decision"] and schema["properties"]["decision"] == {"enum": ["approve", "reject"]}
    assert set(schema["properties"]["editedArgs"]["properties"]) == {"path", "content"}
    state = [e for e in events if e["type"] == "STATE_SNAPSHOT"][-1]["snapshot"]
    assert state["pendingInterrupts"] == [str(approval.pk)] and state["status"] == "waiting_for_approval"


def test_resuming_with_approve_decides_via_agui_runs_the_call_and_ends_in_success(alice, agent, settings):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=approve(interrupt["id"]))

    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "agui", alice)
    assert last(events) == {"type": "RUN_FINISHED", "threadId": "thread-1", "runId": "run-thread-1", "outcome": {"type": "success"}}
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert (result["toolCallId"], result["content"]) == (interrupt["toolCallId"], "Wrote 5 bytes to a.txt.")
    texts = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["I did write a.txt: Wrote 5 bytes to a.txt."]
    assert (settings.HITL_SANDBOX_ROOT / str(approval.conversation_id) / "a.txt").read_text() == "hello"


def test_resuming_an_interrupt_decided_already_is_a_run_error_naming_who_decided(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    run(token, resume=approve(interrupt["id"]))

    events = run(token, resume=approve(interrupt["id"]))

    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert last(events)["code"] == "already_decided"
    assert last(events)["message"] == f"Interrupt {interrupt['id']} was already approved by alice via agui."


def test_a_rejection_keeps_its_reason_and_the_model_is_told(alice, agent, settings):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=[{"interruptId": interrupt["id"], "status": "resolved",
                                 "payload": {"decision": "reject", "reason": "not that file"}}])

    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "not that file", "agui")
    assert last(events)["outcome"] == {"type": "success"}
    assert "not that file" in "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert not (settings.HITL_SANDBOX_ROOT / str(approval.conversation_id) / "a.txt").exists()


def test_a_cancelled_interrupt_is_rejected(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=[{"interruptId": interrupt["id"], "status": "cancelled"}])

    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.rejection_reason) == ("rejected", "Cancelled in the AG-UI client.")
    assert last(events)["outcome"] == {"type": "success"}


def test_edited_arguments_are_approved_as_edited_and_what_runs_is_the_edit(alice, agent, settings):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=approve(interrupt["id"], editedArgs={"path": "a.txt", "content": "goodbye"}))

    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.edited_arguments, approval.edited_by, approval.decided_via) == (
        "approved", {"path": "a.txt", "content": "goodbye"}, alice, "agui")
    assert last(events)["outcome"] == {"type": "success"}
    assert (settings.HITL_SANDBOX_ROOT / str(approval.conversation_id) / "a.txt").read_text() == "goodbye"


def test_edited_arguments_the_tool_refuses_are_a_run_error_and_nothing_is_decided(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=approve(interrupt["id"], editedArgs={"path": 7}))

    assert last(events)["type"] == "RUN_ERROR" and last(events)["code"] == "invalid_arguments"
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_a_question_is_an_interrupt_with_the_answers_schema_and_is_answered_by_resume(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="ask me to choose between tea, coffee and water"))
    assert (interrupt["reason"], interrupt["message"]) == ("question", "Which one?")
    assert interrupt["responseSchema"]["properties"]["answer"] == {"enum": ["tea", "coffee", "water"]}

    refused = run(token, resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"answer": "milk"}}])
    assert (last(refused)["type"], last(refused)["code"]) == ("RUN_ERROR", "invalid_answer")
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"

    events = run(token, resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"answer": "tea"}}])

    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.answer, approval.decided_via) == ("answered", "tea", "agui")
    assert last(events)["outcome"] == {"type": "success"}
    assert "You answered: tea." in "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_plan_is_an_interrupt_approved_with_its_chosen_steps(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="plan a tidy-up"))
    assert interrupt["reason"] == "plan" and interrupt["responseSchema"]["properties"]["steps"]["items"] == {"enum": [1, 2, 3]}

    refused = run(token, resume=approve(interrupt["id"], steps=[2]))  # step 1 is required
    assert last(refused)["code"] == "invalid_answer" and "required" in last(refused)["message"]

    events = run(token, resume=approve(interrupt["id"], steps=[1, 3]))

    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.answer["approved_steps"], approval.decided_via) == ("approved", [1, 3], "agui")
    assert last(events)["outcome"] == {"type": "success"}


def test_a_critical_call_is_approved_only_with_its_confirmation_in_the_payload(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="delete all files"))
    assert interrupt["metadata"]["confirmationHint"] == "DELETE"
    assert interrupt["responseSchema"]["then"] == {"required": ["confirmation"]}

    for payload in ({}, {"confirmation": "delete"}):
        refused = run(token, resume=approve(interrupt["id"], **payload))
        assert last(refused)["code"] == "confirmation_required" and '"confirmation": "DELETE"' in last(refused)["message"]
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"

    events = run(token, resume=approve(interrupt["id"], confirmation="DELETE"))

    assert Approval.objects.get(pk=interrupt["id"]).status == "approved"
    assert last(events)["outcome"] == {"type": "success"}


def test_the_owner_may_not_approve_a_call_that_needs_four_eyes_but_may_reject_it(alice, ops_agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="delete a.txt", slug="ops"))

    assert interrupt["metadata"]["approverRequired"] is True
    refused = run(token, slug="ops", resume=approve(interrupt["id"]))

    assert (last(refused)["code"], "four eyes" in last(refused)["message"]) == ("not_allowed", True)
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"
    run(token, slug="ops", resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "reject"}}])
    assert Approval.objects.get(pk=interrupt["id"]).status == "rejected"


def test_a_call_that_needs_step_up_is_not_approved_here_but_may_be_rejected(alice, agent):
    agent.step_up_from_risk = "medium"
    agent.save()
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    assert interrupt["metadata"]["stepUpRequired"] is True

    refused = run(token, resume=approve(interrupt["id"]))

    assert last(refused)["code"] == "step_up_required" and "passkey" in last(refused)["message"]
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_an_expired_interrupt_is_refused_as_decided_by_its_timeout(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    Approval.objects.filter(pk=interrupt["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    events = run(token, resume=approve(interrupt["id"]))

    assert last(events)["type"] == "RUN_ERROR" and "expired" in last(events)["message"]
    assert Approval.objects.get(pk=interrupt["id"]).status == "expired"


def test_a_decision_bound_to_a_version_not_shown_decides_nothing(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=approve(interrupt["id"], shownHash="0" * 64))

    assert last(events)["code"] == "changed"
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"
    run(token, resume=approve(interrupt["id"], shownHash=interrupt["metadata"]["shownHash"]))
    assert Approval.objects.get(pk=interrupt["id"]).status == "approved"


def test_one_refused_entry_decides_none_of_the_others(alice, agent):
    token = ApiToken.issue(alice)
    first, second = interrupts(run(token, text="delete a.txt and b.txt"))

    events = run(token, resume=approve(first["id"]) + [{"interruptId": second["id"], "status": "resolved", "payload": {"decision": "maybe"}}])

    assert last(events)["code"] == "invalid_payload"
    assert {a.status for a in Approval.objects.all()} == {"pending"}


def test_deciding_one_of_two_ends_the_run_at_once_with_the_other_interrupt(alice, agent):
    token = ApiToken.issue(alice)
    first, second = interrupts(run(token, text="delete a.txt and b.txt"))

    events = run(token, resume=approve(first["id"]))

    assert [i["id"] for i in interrupts(events)] == [second["id"]]
    assert Approval.objects.get(pk=first["id"]).status == "approved"


def test_a_new_message_while_the_thread_waits_is_a_run_error_and_is_not_stored(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    stored = Message.objects.count()

    events = run(token, text="yes")

    assert (last(events)["code"], interrupt["id"] in last(events)["message"]) == ("interrupted", True)
    assert Message.objects.count() == stored
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_the_next_message_of_a_thread_is_the_next_turn_of_its_conversation(alice, agent):
    token = ApiToken.issue(alice)
    run(token, text="what is 2 + 2")
    conversation = thread_of(alice)

    events = run(token, text="what is 3 + 3")

    assert thread_of(alice) == conversation and Conversation.objects.count() == 1
    assert last(events)["outcome"] == {"type": "success"}
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["I did calculate 3 + 3: 3 + 3 = 6"]


def test_a_retried_run_is_shown_again_and_its_message_is_not_posted_twice(alice, agent):
    """A client retrying a run (the same runId and message: a dropped connection, a proxy) once its
    turn is over, or while it waits for a human, is shown that run again; nothing is posted twice."""
    token = ApiToken.issue(alice)
    answered = run(token, text="what is 2 + 2")
    paused = run(token, thread="thread-2", text="write hello to a.txt")

    again = run(token, text="what is 2 + 2")
    paused_again = run(token, thread="thread-2", text="write hello to a.txt")

    user_messages = Message.objects.filter(role=Message.Role.USER)
    assert sorted(user_messages.values_list("content", flat=True)) == ["what is 2 + 2", "write hello to a.txt"]
    assert [e for e in again if e["type"] == "TEXT_MESSAGE_CONTENT"] == [e for e in answered if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert last(again)["outcome"] == {"type": "success"}
    assert [i["id"] for i in interrupts(paused_again)] == [i["id"] for i in interrupts(paused)]
    assert ToolCall.objects.filter(name="write_file").count() == 1


def test_the_same_words_in_a_new_run_are_a_new_turn(alice, agent):
    token = ApiToken.issue(alice)
    body = {"threadId": "thread-1", "messages": [{"id": "m-1", "role": "user", "content": "what is 2 + 2"}]}
    for run_id in ("run-a", "run-b"):
        events_of(call("POST", "/agui/demo/", token=token, json=body | {"runId": run_id}))

    assert Message.objects.filter(role=Message.Role.USER, content="what is 2 + 2").count() == 2


def test_a_run_with_no_new_message_follows_the_thread_as_it_is(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    again = run(token)  # a reconnecting client: the same pause

    assert [i["id"] for i in interrupts(again)] == [interrupt["id"]]
    assert last(run(token, thread="never-seen"))["code"] == "unknown_thread"


def test_a_chat_conversation_goes_on_over_ag_ui_by_its_id(alice, agent):
    token = ApiToken.issue(alice)
    conversation = services.start_conversation(user=alice, agent=agent, content="what is 1 + 1")

    events = run(token, thread=str(conversation.pk), text="what is 2 + 2")

    assert last(events)["outcome"] == {"type": "success"}
    assert Conversation.objects.count() == 1
    assert conversation.messages.filter(role="user").count() == 2


# --- Threads and interrupts are their owner's ---------------------------------------------------------------


def test_another_users_thread_is_never_joined_and_their_interrupts_are_not_this_threads(alice, mallory, agent):
    alice_token, mallory_token = ApiToken.issue(alice), ApiToken.issue(mallory)
    [interrupt] = interrupts(run(alice_token, text="write hello to a.txt"))
    alices = thread_of(alice)

    refused = run(mallory_token, resume=approve(interrupt["id"]))  # her own thread-1 does not exist
    assert last(refused)["code"] == "unknown_thread"
    run(mallory_token, text="what is 2 + 2")  # the same thread id: a conversation of her own
    assert thread_of(mallory) != alices
    refused = run(mallory_token, resume=approve(interrupt["id"]))
    assert (last(refused)["code"], last(refused)["message"]) == (
        "unknown_interrupt", f"Interrupt '{interrupt['id']}' is not one of this thread's interrupts.")
    by_id = run(mallory_token, thread=str(alices.pk), resume=approve(interrupt["id"]))  # alice's conversation id
    assert last(by_id)["code"] == "unknown_thread"

    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"
    assert alices.messages.filter(author=mallory).count() == 0


# --- The gate: token or session, agent, body, input ------------------------------------------------------------


def test_a_run_without_a_valid_token_or_session_is_401_and_nothing_runs(alice, agent):
    ApiToken.issue(alice)
    body = {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "write hello to a.txt"}]}
    for token, headers in ((None, {}), ("hitl_not-a-token", {}), (None, {"Authorization": "Basic YWxpY2U6YWxpY2U="}),
                           (None, {"Cookie": "sessionid=notasession"})):
        response = call("POST", "/agui/demo/", token=token, headers=headers, json=body)
        assert response.status_code == 401, (token, headers)
        assert response.headers["www-authenticate"] == "Bearer"
    assert not Conversation.objects.exists()


def signed_in_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def test_a_signed_in_session_runs_from_this_sites_pages_only(alice, agent):
    cookie = signed_in_cookie(alice)

    events = run(None, text="what is 2 + 2", headers={"Cookie": cookie, "Origin": "http://localhost"})
    assert last(events)["outcome"] == {"type": "success"}

    for origin in ({"Origin": "https://evil.example"}, {}):
        response = call("POST", "/agui/demo/", headers={"Cookie": cookie, **origin},
                        json={"threadId": "t2", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "what is 1 + 1"}]})
        assert response.status_code == 403, origin
    assert Conversation.objects.count() == 1


def test_a_bad_token_is_not_rescued_by_a_session(alice, agent):
    response = call("POST", "/agui/demo/", token="hitl_wrong", headers={"Cookie": signed_in_cookie(alice), "Origin": "http://localhost"},
                    json={"threadId": "t", "runId": "r", "messages": []})
    assert response.status_code == 401


def test_an_unknown_agent_and_one_not_granted_are_the_same_404(alice, agent):
    token = ApiToken.issue(alice)
    body = {"threadId": "t", "runId": "r", "messages": []}
    assert call("POST", "/agui/nope/", token=token, json=body).status_code == 404
    agent.open_to_everyone = False
    agent.save()
    assert call("POST", "/agui/demo/", token=token, json=body).json() == {"detail": "No such agent."}
    assert call("GET", "/agui/demo/", token=token).status_code in (404, 405)


def test_input_that_is_not_a_run_is_a_4xx_and_nothing_is_stored(alice, agent):
    token = ApiToken.issue(alice)
    bad = [
        (b"not json", 400), (b"[]", 422), (b'{"threadId": "t"}', 422),
        (json.dumps({"threadId": "t", "runId": "r", "messages": "hi"}).encode(), 422),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "1", "status": "maybe"}]}).encode(), 422),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "wizard", "content": "x"}]}).encode(), 422),
        (b"\xff\xfe", 400),
    ]
    for body, status in bad:
        response = call("POST", "/agui/demo/", token=token, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == status, (body, response.text)
    too_big = call("POST", "/agui/demo/", token=token, content=b"x" * (MAX_BODY_BYTES + 1))
    assert too_big.status_code == 413
    assert not Conversation.objects.exists() and not ToolCall.objects.exists()


def test_what_a_run_cannot_do_is_a_run_error_with_a_code(alice, agent):
    token = ApiToken.issue(alice)
    cases = [
        ({"threadId": "x" * 201, "messages": [{"id": "m", "role": "user", "content": "hi"}]}, "invalid_thread"),
        ({"threadId": "t\x00", "messages": [{"id": "m", "role": "user", "content": "hi"}]}, "invalid_thread"),
        ({"threadId": "t", "messages": [{"id": "m", "role": "user", "content": [
            {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}}]}]}, "unsupported_content"),
        ({"threadId": "t", "messages": [{"id": "m", "role": "user", "content": "   "}]}, "message_refused"),
    ]
    for body, code in cases:
        events = events_of(call("POST", "/agui/demo/", token=token, json={"runId": "r", **body}))
        assert (types(events), last(events)["code"]) == (["RUN_STARTED", "RUN_ERROR"], code), body
    token_run = run(token, text="write hello to a.txt")
    [interrupt] = interrupts(token_run)
    for entry, code in (
        ({"interruptId": "abc", "status": "resolved", "payload": {"decision": "approve"}}, "unknown_interrupt"),
        ({"interruptId": "99999999", "status": "resolved", "payload": {"decision": "approve"}}, "unknown_interrupt"),
        ({"interruptId": interrupt["id"], "status": "resolved", "payload": "approve"}, "invalid_payload"),
        ({"interruptId": interrupt["id"], "status": "resolved", "payload": {"answer": "x"}}, "invalid_payload"),
        ({"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "approve", "editedArgs": []}}, "invalid_payload"),
        ({"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "approve", "shownHash": 5}}, "invalid_payload"),
    ):
        events = run(token, resume=[entry])
        assert last(events)["code"] == code, entry
    twice = run(token, resume=approve(interrupt["id"]) * 2)
    assert last(twice)["code"] == "invalid_resume"
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_the_example_page_and_its_vendored_client_are_served(db):
    page = call("GET", "/agui/example/")
    assert page.status_code == 200 and "AG-UI" in page.text
    client = call("GET", "/agui/example/vendor/ag-ui-client.js")
    assert client.status_code == 200 and "javascript" in client.headers["content-type"]
    assert call("POST", "/agui/example/").status_code == 401  # a run needs a token, whatever the slug


def test_text_no_database_can_store_is_refused_never_an_internal_error(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    bad = "a\x00b"  # a NUL is JSON text, but PostgreSQL stores none
    edited = run(token, resume=approve(interrupt["id"], editedArgs={"path": "a.txt", "content": bad}))
    assert last(edited)["code"] == "invalid_arguments", last(edited)
    rejected = run(token, resume=[{"interruptId": interrupt["id"], "status": "resolved",
                                   "payload": {"decision": "approve", "confirmation": bad, "shownHash": bad}}])
    assert last(rejected)["code"] == "changed", last(rejected)
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"
    message = run(token, thread="other", text=f"what is {bad}")
    assert last(message)["code"] in ("message_refused", None) or last(message)["type"] == "RUN_FINISHED", last(message)
    [question] = interrupts(run(token, thread="q", text="ask me what to call the file"))
    answered = run(token, thread="q", resume=[{"interruptId": question["id"], "status": "resolved", "payload": {"answer": "x\x00"}}])
    assert last(answered)["code"] == "invalid_answer"
    # A lone surrogate is valid JSON but no text at all (neither stored nor sent back): the body is refused.
    surrogate = json.dumps({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "a\ud800b"}]})
    assert call("POST", "/agui/demo/", token=token, content=surrogate, headers={"Content-Type": "application/json"}).status_code == 400
    body = b'{"threadId": "t", "runId": "r", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    deep = call("POST", "/agui/demo/", token=token, content=body, headers={"Content-Type": "application/json"})
    assert deep.status_code == 400


def test_a_user_with_too_many_runs_open_is_told_to_retry_and_nothing_runs(alice, agent, monkeypatch):
    from aguilink import app

    token = ApiToken.issue(alice)
    monkeypatch.setitem(app.open_runs, alice.pk, app.MAX_OPEN_RUNS)

    response = call("POST", "/agui/demo/", token=token, json={"threadId": "t", "runId": "r", "messages": [
        {"id": "m", "role": "user", "content": "write hello to a.txt"}]})

    assert (response.status_code, response.headers["retry-after"]) == (429, "1")
    assert not Conversation.objects.exists()
