"""Fair sharing of waiting (issue 36 item 3): A2A streams and calls and the MCP gateway's calls are
capped per user as well as per token, so that a user's second token does not get around the cap,
and a user at the cap takes nothing from another user. In process, through the real ASGI apps
(hitl.mounted.Authenticate finds the token's user before any body is read); the JSON API's long
polls have theirs in tests/chat/test_outside.py, AG-UI's runs in tests/aguilink/test_aguilink.py."""
import asyncio
import json

import httpx2
import pytest
from django.db import connections
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as McpError

import agentlink.app
from agentlink import limits
from agentlink.models import Task
from approvals.models import Approval
from approvals.services import decide
from chat.models import ApiToken, Conversation, Message, ToolCall
from mcpgateway import server
from mcpgateway.app import application as mcp_application
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)  # the apps' own threads see only committed rows

THROTTLE = agentlink.app.authenticated.app  # the one limits.Throttle in front of A2A's routes
DEADLINE_SECONDS = 20


async def until(predicate, message: str) -> None:
    """Wait, without blocking the event loop the apps run on, until `predicate()` is true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_SECONDS
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {DEADLINE_SECONDS} s waiting for {message}")
        await asyncio.sleep(0.02)


# --- A2A ---------------------------------------------------------------------------------------------


def working_task(user, agent) -> Task:
    """A task whose run is under way (its conversation running, nothing pending): a stream of it
    stays open until the run ends."""
    conversation = Conversation.objects.create(owner=user, agent=agent, title="working", status=Conversation.Status.RUNNING)
    Message.objects.create(conversation=conversation, position=1, role=Message.Role.USER, content="work on it", author=user)
    return Task.objects.create(conversation=conversation, position=1)


def end_runs() -> None:
    """Every run ends (failed, as a stop on a lost worker would leave it): its streams close."""
    Conversation.objects.filter(status=Conversation.Status.RUNNING).update(status=Conversation.Status.FAILED, error="ended by the test")


class Stream:
    """A SubscribeToTask request to A2A's ASGI app, as a client holding it open sends it: what the
    app sends is kept as it comes, so that a test can wait for the stream's first event."""

    def __init__(self, token: str, task: Task):
        body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": str(task.pk)}}).encode()
        headers = {"host": "localhost", "authorization": f"Bearer {token}", "a2a-version": "1.0",
                   "content-type": "application/json", "content-length": str(len(body))}
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
                 "path": "/a2a/demo/", "raw_path": b"/a2a/demo/", "query_string": b"", "root_path": "",
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()], "server": ("localhost", 80)}
        self.body, self.sent, self.left = body, [], asyncio.Event()
        self.running = asyncio.create_task(agentlink.app.application(scope, self.receive, self.send))

    async def receive(self):
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.left.wait()  # the client stays until the stream ends
        return {"type": "http.disconnect"}

    async def send(self, message):
        self.sent.append(message)

    @property
    def status(self) -> int:
        return self.sent[0]["status"]

    def header(self, name: str) -> str:
        return dict(self.sent[0]["headers"]).get(name.encode(), b"").decode()

    @property
    def text(self) -> str:
        return b"".join(m.get("body", b"") for m in self.sent[1:]).decode()

    async def ended(self) -> "Stream":
        await self.running
        self.left.set()
        return self


def test_a_users_second_token_shares_the_users_cap_of_a2a_streams_and_another_user_is_not_counted(alice, bob, agent, settings):
    settings.HITL_A2A_STREAMS_PER_TOKEN, settings.HITL_A2A_STREAMS_PER_USER = 1, 2
    first, second, third = (ApiToken.issue(alice) for _ in range(3))
    alices, bobs = [working_task(alice, agent) for _ in range(3)], working_task(bob, agent)
    bobs_token = ApiToken.issue(bob)

    async def scenario():
        held = [Stream(first, alices[0]), Stream(second, alices[1])]
        await until(lambda: all("TASK_STATE_WORKING" in stream.text for stream in held), "alice's two streams to follow her tasks")
        over_the_cap = await Stream(third, alices[2]).ended()  # a third token of hers: her cap still
        bobs_stream = Stream(bobs_token, bobs)
        await until(lambda: "TASK_STATE_WORKING" in bobs_stream.text, "bob's stream to follow his task beside hers")
        await asyncio.to_thread(end_runs)
        return over_the_cap, [await stream.ended() for stream in held], await bobs_stream.ended()

    over_the_cap, held, bobs_stream = asyncio.run(scenario())

    assert over_the_cap.status == 200 and over_the_cap.header("retry-after") == "1"
    answer = json.loads(over_the_cap.text)
    assert answer["id"] == 5 and answer["error"]["code"] == limits.TOO_MANY
    assert answer["error"]["message"] == ("Too many requests: your API tokens together already have 2 A2A streams open at once "
                                          "(the cap per user); close one of them, or retry in 1 s.")
    assert answer["error"]["data"] == {"retry_after_seconds": 1, "limit": 2, "kind": "streams"}
    for response, task in zip((*held, bobs_stream), (*alices[:2], bobs)):
        assert response.status == 200 and response.header("content-type").startswith("text/event-stream")
        assert str(task.pk) in response.text and "TASK_STATE_FAILED" in response.text  # followed to its end
    assert dict(THROTTLE.held_by_user["streams"]) == dict(THROTTLE.held["streams"]) == {}  # every slot given back


def test_a2a_calls_are_capped_per_user_across_tokens_and_another_user_keeps_theirs(alice, bob, settings):
    """limits.Throttle around an app whose answers wait until the test lets them go (a blocking
    send waiting for its task, a slow ListTasks)."""
    settings.HITL_A2A_CALLS_PER_TOKEN, settings.HITL_A2A_CALLS_PER_USER = 2, 3
    release = asyncio.Event()

    async def slow_app(scope, receive, send):
        await receive()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    throttle = limits.Throttle(slow_app)

    async def request(user, token: str) -> tuple[int, dict]:
        body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "SendMessage"}).encode()
        scope = {"type": "http", "method": "POST", "path": "/a2a/demo/", "headers": [], "hitl_token": token, "hitl_user": user}
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])
        sent = []

        async def receive():
            return next(messages, {"type": "http.disconnect"})

        async def send(message):
            sent.append(message)

        await throttle(scope, receive, send)
        return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))

    async def scenario():
        held = [asyncio.create_task(request(alice, token)) for token in ("alice-1", "alice-1", "alice-2")]
        held.append(asyncio.create_task(request(bob, "bob-1")))
        await until(lambda: throttle.held_by_user["calls"][alice.pk] == 3 and throttle.held_by_user["calls"][bob.pk] == 1,
                    "the calls to be running")
        refused = await request(alice, "alice-3")  # a token with nothing running: her cap, not its own
        bobs_second = asyncio.create_task(request(bob, "bob-2"))
        await until(lambda: throttle.held_by_user["calls"][bob.pk] == 2, "bob's second call to be running")
        release.set()
        return refused, await asyncio.gather(*held, bobs_second), dict(throttle.held_by_user["calls"])

    refused, answered, left = asyncio.run(scenario())

    assert refused[1]["error"]["code"] == limits.TOO_MANY
    assert "your API tokens together already have 3 A2A calls running at once (the cap per user)" in refused[1]["error"]["message"]
    assert refused[1]["error"]["data"] == {"retry_after_seconds": 1, "limit": 3, "kind": "calls"}
    assert [status for status, body in answered] == [200] * 5 and all(body == {} for _, body in answered)
    assert left == {}


# --- The MCP gateway -----------------------------------------------------------------------------------


async def with_mcp_client(token: str, work):
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=mcp_application), base_url="http://localhost",
                              headers={"Authorization": f"Bearer {token}"}, timeout=DEADLINE_SECONDS)
    async with http, Client(streamable_http_client("http://localhost/mcp/demo/", http_client=http)) as client:
        return await work(client)


def reject_the_pending_call(user) -> None:
    """A human elsewhere rejects the call that waits (in a thread of its own, with its own connection)."""
    try:
        approval = Approval.objects.get(status=Approval.Status.PENDING)
        decide(approval.pk, user=user, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")
    finally:
        connections.close_all()


def test_a_users_second_token_shares_the_users_cap_of_mcp_calls_and_another_user_is_not_counted(alice, mallory, agent, settings):
    settings.HITL_MCP_CALLS_PER_TOKEN, settings.HITL_MCP_CALLS_PER_USER, settings.HITL_MCP_WAIT_SECONDS = 1, 1, 60
    alices_first, alices_second, mallorys = ApiToken.issue(alice), ApiToken.issue(alice), ApiToken.issue(mallory)

    async def scenario():
        waiting = asyncio.create_task(with_mcp_client(alices_first, lambda c: c.call_tool("write_file", {"path": "a.txt", "content": "hi"})))
        await until(lambda: server.IN_FLIGHT_BY_USER[alice.pk] == 1, "alice's gated call to wait")

        async def over_the_cap(client):
            with pytest.raises(McpError) as refused:
                await client.call_tool("calculator", {"expression": "1 + 1"})
            return refused.value

        refused = await with_mcp_client(alices_second, over_the_cap)
        others = await with_mcp_client(mallorys, lambda c: c.call_tool("calculator", {"expression": "2 + 2"}))
        await asyncio.to_thread(wait_until, lambda: Approval.objects.filter(status="pending").exists(), 20, "a pending approval")
        await asyncio.to_thread(reject_the_pending_call, alice)
        return refused, others, await waiting

    refused, others, waited = asyncio.run(scenario())
    connections.close_all()

    assert refused.error.code == server.TOO_MANY == -32029
    assert refused.error.message == ("Too many calls: your API tokens together already have 1 MCP calls in flight at once "
                                     "(the cap per user); retry once one of them is answered.")
    assert "".join(part.text for part in others.content) == "2 + 2 = 4" and others.is_error is False
    assert waited.is_error and "not run" in waited.content[0].text  # her waiting call answered as rejected
    assert not ToolCall.objects.filter(message__conversation__owner=alice, name="calculator").exists()  # nothing asked
    assert dict(server.IN_FLIGHT_BY_USER) == dict(server.IN_FLIGHT) == {}

    freed = asyncio.run(with_mcp_client(alices_second, lambda c: c.call_tool("calculator", {"expression": "3 + 3"})))
    assert freed.is_error is False and freed.content[0].text == "3 + 3 = 6"


def test_each_token_keeps_its_own_cap_under_the_users(alice, agent, settings):
    """With room left in the user's share, one token at its own cap is refused as that token."""
    settings.HITL_MCP_CALLS_PER_TOKEN, settings.HITL_MCP_CALLS_PER_USER, settings.HITL_MCP_WAIT_SECONDS = 0, 5, 60
    token = ApiToken.issue(alice)

    async def over_the_cap(client):
        with pytest.raises(McpError) as refused:
            await client.call_tool("calculator", {"expression": "1 + 1"})
        return refused.value

    refused = asyncio.run(with_mcp_client(token, over_the_cap))

    assert refused.error.code == -32029 and "this token already has 0 MCP calls in flight at once (the cap)" in refused.error.message
    assert not ToolCall.objects.exists()



# --- The JSON API's long polls -------------------------------------------------------------------------


def test_long_polls_that_arrive_together_are_capped_too(alice, bob, agent, settings):
    """The cap counts a poll from its arrival, not from after its first read, which polls sent
    together all await at once: one user's six at once against a cap of two are two waiting and
    four 429s, and another user's read is answered meanwhile."""
    from django.core.asgi import get_asgi_application

    from approvals.api import _waiting
    from tests.conftest import pending_approvals, start_conversation

    settings.HITL_LONG_POLLS_PER_USER = 2
    [approval] = pending_approvals(start_conversation(alice, agent, "write hello to a.txt"))
    alices, bobs = ApiToken.issue(alice), ApiToken.issue(bob)
    django_app = get_asgi_application()

    async def scenario():
        transport = httpx2.ASGITransport(app=django_app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost", timeout=DEADLINE_SECONDS) as client:
            def get(token: str, **params):
                return client.get(f"/api/approvals/{approval.pk}", params=params, headers={"Authorization": f"Bearer {token}"})

            polls = [asyncio.create_task(get(alices, wait=30)) for _ in range(6)]
            await until(lambda: sum(poll.done() for poll in polls) == 4 and _waiting[alice.pk] == 2, "four answers and two waiting")
            bobs_read = await get(bobs)
            await asyncio.to_thread(reject_the_pending_call, alice)
            return [await poll for poll in polls], bobs_read

    answers, bobs_read = asyncio.run(scenario())
    connections.close_all()

    refused = [answer for answer in answers if answer.status_code == 429]
    waited = [answer for answer in answers if answer.status_code == 200]
    assert len(refused) == 4 and all(answer.headers["retry-after"] == "1" for answer in refused)
    assert "You have 2 requests waiting (?wait=) already" in refused[0].json()["detail"]
    assert [answer.json()["status"] for answer in waited] == ["rejected", "rejected"]  # answered by the decision
    assert bobs_read.status_code == 200 and bobs_read.json()["status"] == "pending"
    assert alice.pk not in _waiting
