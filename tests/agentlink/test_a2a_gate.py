"""The gate of agentlink's ASGI app, in process: the bearer token, the agent, the body's size and
length, the host, the per-token caps of calls and streams, and threads of its own."""
import asyncio
import json
import threading
import time

import pytest
from asgiref.sync import SyncToAsync

from agentlink import limits
from agentlink.app import MAX_BODY_BYTES
from chat.models import ApiToken, Conversation
from tests.agentlink.a2a_client import CARD, a2a_task, call, rpc

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


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
