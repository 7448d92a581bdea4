"""The AG-UI endpoint (aguilink) attacked from outside, in process: whoever sends what, the answer is a
clear 4xx before the stream or a RUN_ERROR in it (never a 500, never a stream that hangs), nothing is
decided that should not be, and nothing is lost. tests/aguilink/test_aguilink.py holds the endpoint's promises;
this file holds what an attacker tried, passing or not, so each stays tried."""
import asyncio
import json
import re
import time
from datetime import timedelta

import httpx
import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from aguilink import app
from approvals.policy import calls
from approvals.models import Approval
from chat.models import ApiToken, Conversation, ToolCall
from tests.aguilink.test_aguilink import (
    approve,
    call,
    events_of,
    interrupts,
    last,
    run,
    signed_in_cookie,
    thread_of,
    types,
)

pytestmark = pytest.mark.django_db(transaction=True)

RUN = {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "write hello to a.txt"}]}
EXAMPLE = django_settings.BASE_DIR / "clients" / "agui-example"


def post(body: dict | bytes, *, token: str | None = None, headers: dict | None = None, slug: str = "demo"):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return call("POST", f"/agui/{slug}/", token=token, content=content, headers={"Content-Type": "application/json", **(headers or {})})


def resolved(interrupt_id, payload) -> list[dict]:
    return [{"interruptId": str(interrupt_id), "status": "resolved", "payload": payload}]


def nothing_ran():
    return not Conversation.objects.exists() and not ToolCall.objects.exists()


# --- Who: tokens and sessions --------------------------------------------------------------------------


def test_no_token_a_wrong_token_or_a_revoked_one_is_401_and_nothing_runs(alice, agent):
    token = ApiToken.issue(alice)
    ApiToken.objects.filter(user=alice).delete()
    for sent in (None, "hitl_wrong", token, "", "x" * 5000):
        assert post(RUN, token=sent).status_code == 401, sent
    for authorization in ("Bearer", "Bearer ", "bearer\t", "Token " + token, "Basic YWxpY2U6YWxpY2U="):
        assert post(RUN, headers={"Authorization": authorization}).status_code == 401, authorization
    assert nothing_ran()


def test_a_session_run_needs_this_sites_origin_exactly(alice, agent):
    cookie = signed_in_cookie(alice)
    for origin in (None, "null", "https://evil.example", "http://localhost.evil.example", "http://evil.example/http://localhost",
                   "https://localhost", "http://localhost:8001", "HTTP://LOCALHOST"):
        headers = {"Cookie": cookie} | ({"Origin": origin} if origin is not None else {})
        response = post(RUN, headers=headers)
        assert response.status_code == 403, origin
        assert "Origin" in response.json()["detail"]
    assert nothing_ran()


def test_a_session_that_is_over_is_401(alice, agent):
    cookie = signed_in_cookie(alice)
    alice.set_password("a new one")  # a password change signs every session out
    alice.save()
    assert post(RUN, headers={"Cookie": cookie, "Origin": "http://localhost"}).status_code == 401
    cookie = signed_in_cookie(alice)
    alice.is_active = False
    alice.save()
    assert post(RUN, headers={"Cookie": cookie, "Origin": "http://localhost"}).status_code == 401
    assert nothing_ran()


def test_a_token_decides_who_runs_even_beside_another_users_session(alice, mallory, agent):
    mallory_token = ApiToken.issue(mallory)
    headers = {"Cookie": signed_in_cookie(alice), "Origin": "http://localhost"}

    events = events_of(post(RUN, token=mallory_token, headers=headers))

    assert last(events)["type"] == "RUN_FINISHED"
    assert Conversation.objects.get().owner == mallory
    assert post(RUN, token="hitl_bad", headers=headers).status_code == 401


# --- Whose: threads and interrupts ---------------------------------------------------------------------------


def test_another_users_thread_and_interrupt_are_never_reached_by_id_or_by_name(alice, mallory, agent):
    alice_token, mallory_token = ApiToken.issue(alice), ApiToken.issue(mallory)
    [interrupt] = interrupts(run(alice_token, text="write hello to a.txt"))
    alices = thread_of(alice)
    stored = alices.messages.count()

    for thread in ("thread-1", str(alices.pk), str(alices.pk).upper(), f"{{{alices.pk}}}"):
        follow = run(mallory_token, thread=thread)  # no message: follow the thread as it is
        assert last(follow)["code"] == "unknown_thread", thread
        decided = run(mallory_token, thread=thread, resume=approve(interrupt["id"]))
        assert last(decided)["code"] == "unknown_thread", thread
        assert not any(e["type"].startswith(("TEXT", "TOOL", "STATE")) for e in follow + decided)

    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"
    assert alices.messages.count() == stored


def test_an_interrupt_of_my_other_thread_is_not_decided_from_this_one(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, thread="a", text="write hello to a.txt"))
    run(token, thread="b", text="what is 2 + 2")

    for interrupt_id in (interrupt["id"], f" {interrupt['id']}", f"{interrupt['id']}.0", "٣", "1e3", "-1", "0", "9" * 40):
        events = run(token, thread="b", resume=approve(interrupt_id))
        assert last(events)["code"] == "unknown_interrupt", interrupt_id
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_an_interrupt_is_not_reached_through_another_agents_endpoint(alice, agent, ops_agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    assert last(run(token, slug="ops", resume=approve(interrupt["id"])))["code"] == "unknown_thread"
    run(token, slug="ops", text="what is 2 + 2")  # the same thread name under the other agent: its own conversation
    assert last(run(token, slug="ops", resume=approve(interrupt["id"])))["code"] == "unknown_interrupt"
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


# --- What: decisions -------------------------------------------------------------------------------------------


def test_a_replayed_resume_decides_nothing_more_and_names_who_decided(alice, agent, settings):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    run(token, resume=approve(interrupt["id"]))
    approval = Approval.objects.get(pk=interrupt["id"])

    for entry in (approve(interrupt["id"]), resolved(interrupt["id"], {"decision": "reject"}),
                  [{"interruptId": interrupt["id"], "status": "cancelled"}]):
        events = run(token, resume=entry)
        assert (types(events), last(events)["code"]) == (["RUN_STARTED", "RUN_ERROR"], "already_decided")
        assert "already approved by alice via agui" in last(events)["message"]

    assert Approval.objects.get(pk=interrupt["id"]).decided_at == approval.decided_at
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == "succeeded"
    assert (settings.HITL_SANDBOX_ROOT / str(approval.conversation_id) / "a.txt").read_text() == "hello"


def test_two_resumes_of_one_interrupt_at_once_decide_it_once(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    body = {"threadId": "thread-1", "runId": "r", "messages": [], "resume": approve(interrupt["id"])}

    async def both():
        transport = httpx.ASGITransport(app=app.application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=20) as client:
            send = lambda: client.post("/agui/demo/", json=body, headers={"Authorization": f"Bearer {token}"})  # noqa: E731
            return await asyncio.gather(send(), send())

    outcomes = sorted(last(events_of(response)).get("code") or "finished" for response in asyncio.run(both()))

    assert outcomes == ["already_decided", "finished"]
    assert Approval.objects.get(pk=interrupt["id"]).status == "approved"
    assert ToolCall.objects.get(call_id=interrupt["toolCallId"]).status == "succeeded"


def edit_elsewhere(approval_id, arguments: dict) -> None:
    """The call is edited on another surface, and stays pending (as an edit that needs another approver does)."""
    approval = Approval.objects.select_related("tool_call", "conversation__agent").get(pk=approval_id)
    checked = calls.checker().check(approval, arguments)
    Approval.objects.filter(pk=approval_id).update(edited_arguments=checked.arguments, edited_arguments_hash=checked.arguments_hash)


def test_a_decision_on_a_version_edited_since_it_was_shown_decides_nothing(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    shown = interrupt["metadata"]["shownHash"]
    edit_elsewhere(interrupt["id"], {"path": "a.txt", "content": "changed"})
    approval = Approval.objects.get(pk=interrupt["id"])
    assert approval.shown_hash != shown

    for payload in ({"decision": "approve", "shownHash": shown}, {"decision": "approve"},
                    {"decision": "approve", "shownHash": shown, "editedArgs": {"path": "a.txt", "content": "mine"}}):
        events = run(token, resume=resolved(interrupt["id"], payload))
        assert last(events)["code"] == "changed", payload
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"

    [again] = interrupts(run(token))  # read anew: the edited version, and its hash
    assert again["metadata"]["arguments"] == {"path": "a.txt", "content": "changed"} and again["metadata"]["shownHash"] == approval.shown_hash
    run(token, resume=approve(interrupt["id"], shownHash=again["metadata"]["shownHash"]))
    approval = Approval.objects.get(pk=interrupt["id"])
    assert (approval.status, approval.decided_via) == ("approved", "agui")


def test_a_rejection_stating_a_version_edited_since_decides_nothing_either(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    edit_elsewhere(interrupt["id"], {"path": "a.txt", "content": "changed"})

    events = run(token, resume=resolved(interrupt["id"], {"decision": "reject", "shownHash": interrupt["metadata"]["shownHash"]}))

    assert last(events)["code"] == "changed"
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_a_four_eyes_call_is_not_approved_by_its_requester_even_by_editing_it(alice, ops_agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="delete a.txt", slug="ops"))

    for payload in ({"decision": "approve"}, {"decision": "approve", "editedArgs": {"path": "b.txt"}},
                    {"decision": "approve", "shownHash": interrupt["metadata"]["shownHash"], "confirmation": "DELETE"}):
        events = run(token, slug="ops", resume=resolved(interrupt["id"], payload))
        assert last(events)["type"] == "RUN_ERROR", payload
    approval = Approval.objects.get(pk=interrupt["id"])
    assert approval.status == "pending" and approval.decided_by is None


def test_a_critical_call_is_not_approved_without_its_exact_confirmation(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="delete all files"))
    # (Spaces around it are forgiven, as on every surface: approvals.services strips what was typed.)
    for confirmation in (None, "", "delete", "DELETE!", "DELETE\x00", "D\u0415LETE", ["DELETE"], {"DELETE": 1}, True):
        payload = {"decision": "approve"} | ({} if confirmation is None else {"confirmation": confirmation})
        events = run(token, resume=resolved(interrupt["id"], payload))
        assert last(events)["type"] == "RUN_ERROR", confirmation
    edit = run(token, resume=approve(interrupt["id"], editedArgs={}))  # an edit is no way around it
    assert last(edit)["type"] == "RUN_ERROR"
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_a_critical_plan_is_approved_with_its_confirmation_and_not_without(alice, agent):
    token = ApiToken.issue(alice)
    [plan] = interrupts(run(token, text="plan a tidy-up"))
    Approval.objects.filter(pk=plan["id"]).update(risk="critical", confirmation_hint="TIDY")
    [plan] = interrupts(run(token))
    assert plan["responseSchema"]["properties"]["confirmation"] == {"const": "TIDY"} and plan["metadata"]["confirmationHint"] == "TIDY"

    refused = run(token, resume=approve(plan["id"], steps=[1, 2, 3]))
    assert last(refused)["code"] == "confirmation_required"
    assert Approval.objects.get(pk=plan["id"]).status == "pending"

    run(token, resume=approve(plan["id"], steps=[1, 2, 3], confirmation="TIDY"))
    assert Approval.objects.get(pk=plan["id"]).status == "approved"


def test_a_call_that_needs_step_up_is_not_approved_by_resume_in_any_shape(alice, agent):
    agent.step_up_from_risk = "medium"
    agent.save()
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    for payload in ({"decision": "approve"}, {"decision": "approve", "editedArgs": {"path": "a.txt", "content": "x"}},
                    {"decision": "approve", "stepUp": {"approval": interrupt["id"]}}):
        events = run(token, resume=resolved(interrupt["id"], payload))
        assert last(events)["code"] == "step_up_required", payload
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_an_interrupt_past_its_expiry_is_not_approved(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    Approval.objects.filter(pk=interrupt["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))

    for entry in (approve(interrupt["id"]), approve(interrupt["id"], editedArgs={"path": "a.txt", "content": "x"})):
        events = run(token, resume=entry)
        assert last(events)["type"] == "RUN_ERROR" and "expired" in last(events)["message"]
    assert Approval.objects.get(pk=interrupt["id"]).status == "expired"
    assert ToolCall.objects.get(call_id=interrupt["toolCallId"]).status != "succeeded"


@pytest.mark.parametrize("ask, wrong", [
    ("ask me to choose between tea, coffee and water", [1, None, True, {"tea": 1}, "Tea", ["tea"]]),
    # (A number as text, "5", is read as the number, as a chat reply is.)
    ("ask me for a number between 1 and 10", ["five", 11, 0, None, True, [5], float("nan"), 1e400]),
    ("ask me for a date", ["tomorrow", "2026-02-30", 20260101, None]),
    ("ask me what to call the file", [None, 5, ["x"], {"a": "b"}, "x" * 100_000]),
])
def test_a_question_answered_with_the_wrong_type_is_refused_and_stays_pending(alice, agent, ask, wrong):
    token = ApiToken.issue(alice)
    [question] = interrupts(run(token, text=ask))
    for value in wrong:
        body = json.dumps({"threadId": "thread-1", "runId": "r", "messages": [], "resume": resolved(question["id"], {"answer": value})})
        response = post(body.encode(), token=token)
        if response.status_code != 400:  # NaN and Infinity are no JSON: refused before the run
            assert last(events_of(response))["type"] == "RUN_ERROR" and last(events_of(response))["code"] != "internal_error", value
        assert Approval.objects.get(pk=question["id"]).status == "pending", value


def test_a_plan_with_steps_out_of_range_or_not_numbers_is_refused(alice, agent):
    token = ApiToken.issue(alice)
    [plan] = interrupts(run(token, text="plan a tidy-up"))
    for steps in ([1, 99], [0, 1], [-1, 1], ["1"], [True, 2, 3], [1.0], [1, 1], "1,2", {"1": True}, [[1]], [2**70]):
        events = run(token, resume=approve(plan["id"], steps=steps))
        assert last(events)["type"] == "RUN_ERROR" and last(events)["code"] != "internal_error", steps
    assert Approval.objects.get(pk=plan["id"]).status == "pending"


# --- How: bodies, encodings, text no database stores ----------------------------------------------------------


def test_bodies_that_are_not_a_run_are_4xx_and_nothing_is_stored(alice, agent):
    token = ApiToken.issue(alice)
    for content, status in (
        (b"", 400), (b"null", 422), (b"42", 422), (b'"run"', 422), (b"{", 400), (b"\xc3\x28", 400), (b"\xef\xbb\xbf{}", 422),
        (b'{"threadId": "t", "runId": "r", "messages": [], "messages": 5}', 422),
        (json.dumps({"runId": "r", "messages": []}).encode(), 422),
        (json.dumps({"threadId": "t", "messages": []}).encode(), 422),
        (json.dumps({"threadId": 5, "runId": "r", "messages": []}).encode(), 422),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [{"role": "user", "content": "hi"}]}).encode(), 422),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [], "resume": {"interruptId": "1"}}).encode(), 422),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [], "resume": [{"status": "resolved"}]}).encode(), 422),
        (b'{"threadId": "t", "runId": "r", "messages": [], "state": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400),
        (b'{"threadId": "t", "runId": "r", "messages": [], "state": NaN}', 400),
    ):
        response = post(content, token=token)
        assert response.status_code == status, (content[:80], response.status_code, response.text[:200])
        assert response.headers["content-type"] == "application/json" and response.json()["detail"]
    assert nothing_ran()


def test_a_body_that_is_not_json_by_its_content_type_is_415(alice, agent):
    token = ApiToken.issue(alice)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/html"):
        response = post(RUN, token=token, headers={"Content-Type": content_type})
        assert response.status_code == 415, content_type
    events = events_of(post(RUN, token=token, headers={"Content-Type": "application/json; charset=utf-8"}))
    assert last(events)["type"] == "RUN_FINISHED"


def test_a_body_over_the_cap_or_of_no_stated_length_is_refused_before_it_is_read(alice, agent):
    token = ApiToken.issue(alice)
    assert post(b"{" + b" " * app.MAX_BODY_BYTES + b"}", token=token).status_code == 413
    for length in ("abc", "-1", "1e9", str(10**30), ""):
        response = post(RUN, token=token, headers={"Content-Length": length})
        assert response.status_code in (400, 413), length

    async def chunked():
        async def parts():
            yield json.dumps(RUN).encode()

        transport = httpx.ASGITransport(app=app.application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.post("/agui/demo/", content=parts(), headers={"Authorization": f"Bearer {token}"})

    assert asyncio.run(chunked()).status_code == 411
    assert nothing_ran()


BAD_TEXT = ["a\x00b", "a\ud800b", "\udfff", "\x00"]


@pytest.mark.parametrize("bad", BAD_TEXT)
def test_nul_and_lone_surrogates_in_any_field_of_a_run_are_a_4xx_or_run_error_never_an_internal_error(alice, agent, bad):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    base = {"threadId": "thread-1", "runId": "r", "messages": []}
    message = {"id": "m", "role": "user", "content": "what is 2 + 2"}
    bodies = [
        base | {"threadId": bad},
        base | {"runId": bad},
        base | {"parentRunId": bad},
        base | {"threadId": "fresh", "messages": [message | {"content": bad}]},
        base | {"threadId": "fresh", "messages": [message | {"id": bad}]},
        base | {"threadId": "fresh", "messages": [message | {"content": [{"type": "text", "text": bad}]}]},
        base | {"threadId": "fresh", "messages": [message | {"name": bad}]},
        base | {"threadId": "fresh", "messages": [message], "state": {bad: bad}},
        base | {"threadId": "fresh", "messages": [message], "forwardedProps": {"x": bad}},
        base | {"threadId": "fresh", "messages": [message], "context": [{"description": bad, "value": bad}]},
        base | {"threadId": "fresh", "messages": [message], "tools": [{"name": bad, "description": bad, "parameters": {}}]},
        base | {"resume": [{"interruptId": bad, "status": "resolved", "payload": {"decision": "approve"}}]},
        base | {"resume": resolved(interrupt["id"], {"decision": bad})},
        base | {"resume": resolved(interrupt["id"], {"decision": "reject", "reason": bad})},
        base | {"resume": resolved(interrupt["id"], {"decision": "approve", "shownHash": bad})},
        base | {"resume": resolved(interrupt["id"], {"decision": "approve", "confirmation": bad})},
        base | {"resume": resolved(interrupt["id"], {"decision": "approve", "editedArgs": {"path": "a.txt", "content": bad}})},
        base | {"resume": resolved(interrupt["id"], {"decision": "approve", "editedArgs": {bad: "x", "path": "a.txt", "content": "x"}})},
        base | {"resume": resolved(interrupt["id"], {"decision": "approve", bad: bad})},
        base | {"resume": [{"interruptId": interrupt["id"], "status": "cancelled", "payload": {"reason": bad}}]},
    ]
    for body in bodies:
        response = post(json.dumps(body).encode(), token=token)
        assert response.status_code in (200, 400, 422), (body, response.status_code)
        if response.status_code == 200:
            events = events_of(response)
            assert events[-1]["type"] in ("RUN_ERROR", "RUN_FINISHED"), (body, events[-1])
            assert events[-1].get("code") != "internal_error", (body, events[-1])
        if "resume" in body and Approval.objects.get(pk=interrupt["id"]).status != "pending":
            # Only a rejection may stand (its reason made storable, or refused): never an approval.
            assert Approval.objects.get(pk=interrupt["id"]).status == "rejected", body
            return
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_deeply_nested_edited_arguments_are_refused_never_an_internal_error(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    for depth in (200, 900, 990):
        nested = "[" * depth + "]" * depth
        body = ('{"threadId": "thread-1", "runId": "r", "messages": [], "resume": [{"interruptId": "%s", "status": "resolved", '
                '"payload": {"decision": "approve", "editedArgs": {"path": "a.txt", "content": %s}}}]}') % (interrupt["id"], nested)
        response = post(body.encode(), token=token)
        assert response.status_code in (200, 400), (depth, response.status_code)
        if response.status_code == 200:
            assert last(events_of(response))["code"] not in (None, "internal_error"), depth
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_oversized_fields_are_refused_or_cut_never_an_internal_error(alice, agent):
    token = ApiToken.issue(alice)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))
    base = {"threadId": "thread-1", "runId": "r", "messages": []}
    cases = [
        (base | {"threadId": "big", "messages": [{"id": "m", "role": "user", "content": "x" * 900_000}]}, ("message_refused", None)),
        (base | {"runId": "r" * 400_000}, ("interrupt",)),
        (base | {"resume": approve(interrupt["id"]) * 51}, ("invalid_resume",)),
        (base | {"resume": approve(interrupt["id"], reason="r" * 500_000, shownHash="h" * 500)}, ("invalid_payload",)),
        (base | {"resume": resolved(interrupt["id"], {"decision": "approve", "editedArgs": {"path": "a.txt", "content": "c" * 900_000}})},
         ("invalid_arguments", "edit_refused", None)),
    ]
    for body, expected in cases:
        response = post(body, token=token)
        assert response.status_code in (200, 413), response.status_code
        if response.status_code == 200:
            end = last(events_of(response))
            assert end.get("code") in expected or end.get("outcome", {}).get("type") in expected, (end.get("code"), expected)
    assert Approval.objects.get(pk=interrupt["id"]).status in ("pending", "approved")


# --- How many, and how long ---------------------------------------------------------------------------------------


def held_open(user, agent) -> str:
    """A thread whose conversation says it is running (a worker's turn that never reports): a run that
    follows it stays open until its deadline, or until its client leaves."""
    token = ApiToken.issue(user)
    run(token, thread="slow", text="what is 2 + 2")
    Conversation.objects.filter(external_thread="slow").update(status=Conversation.Status.RUNNING)
    return token


def test_runs_started_together_past_the_cap_are_429_not_all_let_in(alice, agent, monkeypatch):
    token = held_open(alice, agent)
    monkeypatch.setattr(app, "MAX_OPEN_RUNS", 2)
    monkeypatch.setattr(app, "RUN_SECONDS", 2)

    async def many():
        transport = httpx.ASGITransport(app=app.application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", timeout=20) as client:
            body = {"threadId": "slow", "runId": "r", "messages": []}
            return await asyncio.gather(*[
                client.post("/agui/demo/", json=body, headers={"Authorization": f"Bearer {token}"}) for _ in range(5)])

    statuses = sorted(response.status_code for response in asyncio.run(many()))

    assert statuses == [200, 200, 429, 429, 429]
    assert not app.open_runs


def test_a_run_whose_client_leaves_mid_stream_ends_and_frees_its_place(alice, agent, monkeypatch):
    token = held_open(alice, agent)
    body = json.dumps({"threadId": "slow", "runId": "r", "messages": []}).encode()
    sent: list[dict] = []

    async def go():
        left = asyncio.Event()
        given = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if given:
                return given.pop()
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if message["type"] == "http.response.body" and b"STATE_SNAPSHOT" in message.get("body", b""):
                left.set()  # the client goes away once the run is under way

        # As daphne calls the app (ASGI 3.0, no spec_version): Starlette listens for the disconnect.
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/agui/demo/", "raw_path": b"/agui/demo/", "query_string": b"", "root_path": "",
            "server": ("localhost", 80), "client": ("127.0.0.1", 5000),
            "headers": [(b"host", b"localhost"), (b"authorization", f"Bearer {token}".encode()),
                        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
        await asyncio.wait_for(app.application(scope, receive, send), timeout=10)

    conversation = Conversation.objects.get(external_thread="slow")
    stored = conversation.messages.count()
    started = time.monotonic()
    asyncio.run(go())

    assert time.monotonic() - started < 8
    assert sent[0]["status"] == 200
    assert not app.open_runs
    assert conversation.messages.count() == stored  # the client leaving lost nothing, and wrote nothing
    assert Conversation.objects.get(pk=conversation.pk).status == "running"


def test_a_run_that_outlives_its_deadline_ends_with_a_run_error_not_a_hung_stream(alice, agent, monkeypatch):
    token = held_open(alice, agent)
    monkeypatch.setattr(app, "RUN_SECONDS", 1)
    started = time.monotonic()

    events = run(token, thread="slow")

    assert (types(events)[0], last(events)["code"]) == ("RUN_STARTED", "still_running")
    assert time.monotonic() - started < 5
    assert not app.open_runs


# --- The example page ---------------------------------------------------------------------------------------------


def test_the_example_page_is_served_with_a_policy_that_runs_only_its_own_scripts_and_is_never_framed(db):
    for path in ("/agui/example/", "/agui/example/app.js", "/agui/example/vendor/ag-ui-client.js", "/agui/example/style.css"):
        response = call("GET", path)
        assert response.status_code == 200, path
        assert response.headers["x-content-type-options"] == "nosniff"
        policy = dict(directive.strip().partition(" ")[::2] for directive in response.headers["content-security-policy"].split(";"))
        assert (policy["script-src"], policy["frame-ancestors"], policy["object-src"]) == ("'self'", "'none'", "'none'")
        assert response.headers["x-frame-options"] == "DENY"
    assert call("GET", "/agui/example/../../hitl/settings.py").status_code == 404
    assert call("GET", "/agui/example/%2e%2e/%2e%2e/hitl/settings.py").status_code == 404


def test_every_answer_of_the_endpoint_says_nosniff_and_no_store(alice, agent):
    token = ApiToken.issue(alice)
    for response in (post(RUN), post(b"x", token=token), post(RUN, token=token)):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"


def test_the_example_client_renders_what_it_is_sent_as_text_never_as_html():
    """Model text, tool names, arguments, previews and questions reach the page from the agent: app.js
    puts them in the DOM as text nodes and attribute values only."""
    source = (EXAMPLE / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "srcdoc", "createContextualFragment"):
        assert sink not in source, sink
    # `element()` sets attributes by name from the code only: an `on…` name is a listener, never a value from the agent.
    assert re.search(r'name\.startsWith\("on"\)\) node\.addEventListener', source)
    assert "<script" not in (EXAMPLE / "index.html").read_text().replace('<script type="module" src="app.js"></script>', "")
