"""The MCP gateway in process (mcpgateway): the ASGI app's gate (token, agent, body, host), the
agent's tools as tools/list gives them, a call through the agent's gate answered once settled,
garbage refused with a JSON-RPC error, each caller's calls in their own conversation. Driven by the
`mcp` SDK's own Client over streamable HTTP (httpx2's ASGI transport: no server). The loop's parts
run inline (eager Celery, the in-memory channel layer); tests/e2e/protocols/test_mcpgateway_e2e.py drives the
same through daphne, a worker and Chromium."""
import asyncio
import json
import threading

import httpx2
import mcp_types as types
import pytest
from django.db import connection, connections
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as McpError

from approvals.models import Approval
from approvals.services import decide, expire_overdue
from chat.models import ApiToken, Conversation, ToolCall
from mcpgateway.app import MAX_BODY_BYTES, application
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)  # the gateway's threads see only committed rows

BASE = "http://localhost"
ENVELOPE = "io.modelcontextprotocol/"


def call(method: str, path: str, *, token: str | None = None, headers: dict | None = None, **kwargs) -> httpx2.Response:
    """One raw request to the gateway's ASGI app, as a client would send it (no server)."""
    sent = {"Accept": "application/json, text/event-stream", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"

    async def go():
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=application), base_url=BASE, timeout=20) as client:
            return await client.request(method, path, headers=sent, **kwargs)

    return asyncio.run(go())


def rpc(token: str, method: str, params: dict | None = None, *, slug: str = "demo", legacy: bool = False) -> dict:
    """One JSON-RPC request, answered as JSON or as one SSE event: of the 2026-07-28 protocol (each
    request stands alone, with its envelope in `_meta`), or of a handshake-era client."""
    params = dict(params or {})
    headers = {}
    if not legacy:
        params["_meta"] = {ENVELOPE + "protocolVersion": "2026-07-28", ENVELOPE + "clientCapabilities": {}}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
        if "name" in params:
            headers["Mcp-Name"] = str(params["name"])
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    response = call("POST", f"/mcp/{slug}/", token=token, json=body, headers=headers)
    return parsed(response)


def parsed(response: httpx2.Response) -> dict:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return next(event for event in events if "id" in event)
    return response.json()


async def with_client(token: str, work, *, slug: str = "demo", mode: str = "auto"):
    """`work(client)` with the SDK's Client connected to the gateway in process."""
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=application), base_url=BASE,
                              headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(f"{BASE}/mcp/{slug}/", http_client=http), mode=mode) as client:
        return await work(client)


def sdk(token: str, work, **kwargs):
    return asyncio.run(with_client(token, work, **kwargs))


def text_of(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


# --- The gate in front ---------------------------------------------------------------------------------


def test_a_request_without_a_valid_token_is_401_asking_for_a_bearer_token(alice, agent):
    ApiToken.issue(alice)
    for token, headers in ((None, {}), ("hitl_not-a-token", {}), ("", {}), (None, {"Authorization": "Basic YWxpY2U6YWxpY2U="})):
        response = call("POST", "/mcp/demo/", token=token, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert response.status_code == 401, (token, headers)
        assert response.headers["www-authenticate"] == "Bearer"
        assert "API token is required" in response.json()["detail"]
    assert not Conversation.objects.exists()


def test_an_inactive_users_token_is_401(alice, agent):
    token = ApiToken.issue(alice)
    alice.is_active = False
    alice.save()

    assert call("POST", "/mcp/demo/", token=token, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401


def test_an_unknown_agent_and_one_the_user_may_not_use_are_the_same_404(alice, agent):
    token = ApiToken.issue(alice)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    unknown = call("POST", "/mcp/nope/", token=token, json=body)
    assert (unknown.status_code, unknown.json()["detail"]) == (404, "No such agent.")

    agent.open_to_everyone = False
    agent.save()

    hidden = call("POST", "/mcp/demo/", token=token, json=body)
    assert (hidden.status_code, hidden.json()) == (404, unknown.json())
    assert call("POST", "/mcp/bad slug!/", token=token, json=body).status_code == 404  # no agent's path at all
    assert call("POST", "/mcp/demo/extra", token=token, json=body).status_code == 404


def test_a_body_over_the_cap_is_413_before_anything_reads_it(alice, agent):
    token = ApiToken.issue(alice)

    response = call("POST", "/mcp/demo/", token=token, content=b"x" * (MAX_BODY_BYTES + 1), headers={"Content-Type": "application/json"})

    assert response.status_code == 413 and f"over {MAX_BODY_BYTES} bytes" in response.json()["detail"]
    assert not Conversation.objects.exists()


def test_a_host_not_in_allowed_hosts_is_400(alice, agent):
    token = ApiToken.issue(alice)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

    assert call("POST", "/mcp/demo/", token=token, json=body, headers={"Host": "evil.example"}).status_code == 400


# --- tools/list ------------------------------------------------------------------------------------------


def test_tools_list_gives_the_agents_tools_under_the_loops_names_with_their_schemas(alice, agent):
    token = ApiToken.issue(alice)

    async def listed(client):
        return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in sdk(token, listed)}

    # Its actions; a question or a plan is the loop's model asking a human, no tool a client calls.
    assert sorted(tools) == sorted(name for name in agent.tools if name not in ("ask_human", "propose_plan"))
    assert tools["calculator"].input_schema["properties"]["expression"]["type"] == "string"
    assert tools["calculator"].input_schema["required"] == ["expression"]
    assert tools["delete_file"].description


def test_tools_list_answers_a_handshake_era_client_too(alice, agent):
    token = ApiToken.issue(alice)

    async def listed(client):
        return [tool.name for tool in (await client.list_tools()).tools]

    assert "calculator" in sdk(token, listed, mode="legacy")


# --- tools/call -------------------------------------------------------------------------------------------


def test_an_ungated_call_runs_at_once_and_returns_its_result(alice, agent):
    token = ApiToken.issue(alice)

    async def calculate(client):
        return await client.call_tool("calculator", {"expression": "6 * 7"})

    result = sdk(token, calculate)

    assert (result.is_error, text_of(result)) == (False, "6 * 7 = 42")
    call_row = ToolCall.objects.get(name="calculator")
    conversation = call_row.message.conversation
    assert (call_row.status, call_row.is_gated, call_row.result) == ("succeeded", False, "6 * 7 = 42")
    assert (conversation.source, conversation.owner, conversation.agent) == ("mcp", alice, agent)
    assert conversation.status == Conversation.Status.IDLE  # never advanced by the loop


def test_a_tool_the_agent_does_not_have_is_invalid_params_and_nothing_is_stored(alice, agent):
    response = rpc(ApiToken.issue(alice), "tools/call", {"name": "rm_rf", "arguments": {}})

    assert response["error"]["code"] == types.INVALID_PARAMS and "Unknown tool 'rm_rf'" in response["error"]["message"]
    assert not ToolCall.objects.exists()


def test_arguments_that_do_not_fit_the_schema_are_a_tool_error_the_model_can_read(alice, agent):
    response = rpc(ApiToken.issue(alice), "tools/call", {"name": "calculator", "arguments": {"expr": "1"}})

    assert response["result"]["isError"] is True
    assert "Invalid arguments for calculator" in response["result"]["content"][0]["text"]
    assert not ToolCall.objects.exists()


def test_garbage_is_a_json_rpc_error_never_a_500(alice, agent):
    token = ApiToken.issue(alice)
    for legacy in (False, True):
        headers = {"Content-Type": "application/json"} | ({} if legacy else {"MCP-Protocol-Version": "2026-07-28"})
        for body in (b"{not json", b"[]", b"42", b'{"jsonrpc": "2.0", "id": 1}', b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}}'):
            response = call("POST", "/mcp/demo/", token=token, content=body, headers=headers)
            assert 200 <= response.status_code < 500, (legacy, body, response.status_code, response.text)
            if response.status_code == 200:
                assert "error" in parsed(response), (legacy, body, response.text)
    assert rpc(token, "no/such/method")["error"]["code"] == types.METHOD_NOT_FOUND
    assert not ToolCall.objects.exists()


def test_each_caller_calls_in_a_conversation_of_their_own(alice, mallory, agent):
    alices, mallorys = ApiToken.issue(alice), ApiToken.issue(mallory)

    async def calculate(client):
        return await client.call_tool("calculator", {"expression": "1 + 1"})

    sdk(alices, calculate)
    sdk(alices, calculate)
    sdk(mallorys, calculate)

    by_owner = {c.owner.username: c for c in Conversation.objects.filter(source="mcp")}
    assert set(by_owner) == {"alice", "mallory"}
    assert by_owner["alice"].messages.count() == 2 and by_owner["mallory"].messages.count() == 1


# --- A gated call waits for its decision --------------------------------------------------------------


def decide_when_pending(*, user, approve: bool, reason: str = "", via: str = "api") -> threading.Thread:
    """A human elsewhere: once a call waits, they decide it (as the API would)."""

    def run():
        try:
            wait_until(lambda: Approval.objects.filter(status="pending").exists(), timeout=20, message="a pending approval")
            approval = Approval.objects.get(status="pending")
            decide(approval.pk, user=user, approve=approve, via=via, shown_hash=approval.shown_hash, reason=reason)
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def call_and_collect(token: str, name: str, arguments: dict, **kwargs) -> tuple[types.CallToolResult, list]:
    """The call's result and the progress notifications sent while it waited."""
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    async def work(client):
        return await client.call_tool(name, arguments, progress_callback=on_progress)

    return sdk(token, work, **kwargs), progress


def test_a_gated_call_waits_for_its_decision_then_returns_the_tools_result(alice, agent, settings):
    token = ApiToken.issue(alice)
    settings.HITL_MCP_WAIT_SECONDS = 30
    decider = decide_when_pending(user=alice, approve=True)

    result, progress = call_and_collect(token, "write_file", {"path": "a.txt", "content": "hello"})
    decider.join()

    assert (result.is_error, text_of(result)) == (False, "Wrote 5 bytes to a.txt.")
    approval = Approval.objects.get()
    assert (approval.status, approval.decided_via, approval.tool_call.status) == ("approved", "api", "succeeded")
    assert (settings.HITL_SANDBOX_ROOT / str(approval.conversation_id) / "a.txt").read_text() == "hello"
    # (httpx2's ASGI transport hands the response over whole, so the progress notifications sent
    # while it waited are seen only on a real server: tests/e2e/protocols/test_mcpgateway_e2e.py.)


def test_a_rejected_call_is_a_tool_error_saying_who_rejected_it_and_why(alice, agent, settings):
    token = ApiToken.issue(alice)
    settings.HITL_MCP_WAIT_SECONDS = 30
    decider = decide_when_pending(user=alice, approve=False, reason="not that file")

    result, _ = call_and_collect(token, "write_file", {"path": "a.txt", "content": "hello"}, mode="legacy")
    decider.join()

    assert result.is_error is True
    assert text_of(result).startswith("write_file was not run. Rejected by alice via api at ")
    assert text_of(result).endswith(": not that file.")
    approval = Approval.objects.get()
    assert (approval.status, approval.tool_call.status) == ("rejected", "rejected")
    assert not (settings.HITL_SANDBOX_ROOT / str(approval.conversation_id) / "a.txt").exists()


WRITE = {"path": "a.txt", "content": "hello"}


def test_a_wait_that_ends_undecided_says_to_call_again_and_an_identical_call_joins_the_same_approval(alice, agent, settings):
    token = ApiToken.issue(alice)
    settings.HITL_MCP_WAIT_SECONDS = 0.5

    first, _ = call_and_collect(token, "write_file", WRITE)
    again, _ = call_and_collect(token, "write_file", WRITE)

    approval = Approval.objects.get()  # one approval: the second call joined the first
    for result in (first, again):
        assert result.is_error is True
        assert text_of(result) == (f"No decision yet on approval #{approval.pk} for write_file. Nothing was run. Call "
                                   "write_file again with the same arguments to keep waiting for the same decision.")
    assert ToolCall.objects.count() == 1 and approval.status == "pending"


def test_a_call_approved_while_its_client_was_gone_runs_once_when_the_client_calls_again(alice, agent, settings):
    """As after a restarted daphne: the decision came while nobody waited, so nobody ran the call;
    the same call again finds it approved, runs it once and answers with its result."""
    token = ApiToken.issue(alice)
    settings.HITL_MCP_WAIT_SECONDS = 0.5
    call_and_collect(token, "write_file", WRITE)
    approval = Approval.objects.get()
    decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)
    assert ToolCall.objects.get().status == "approved"  # nobody ran it yet

    settings.HITL_MCP_WAIT_SECONDS = 30
    result, _ = call_and_collect(token, "write_file", WRITE)
    later, _ = call_and_collect(token, "calculator", {"expression": "1 + 1"})

    assert (result.is_error, text_of(result)) == (False, "Wrote 5 bytes to a.txt.")
    assert ToolCall.objects.filter(name="write_file").count() == 1
    assert ToolCall.objects.get(name="write_file").status == "succeeded"
    assert Approval.objects.count() == 1 and later.is_error is False


def test_a_finished_call_is_never_joined_the_same_call_again_asks_again(alice, agent, settings):
    token = ApiToken.issue(alice)
    settings.HITL_MCP_WAIT_SECONDS = 30
    rejected = decide_when_pending(user=alice, approve=False, reason="no")
    call_and_collect(token, "write_file", WRITE)
    rejected.join()
    settings.HITL_MCP_WAIT_SECONDS = 0.5

    call_and_collect(token, "write_file", WRITE)

    assert list(Approval.objects.order_by("pk").values_list("status", flat=True))[0] == "rejected"
    assert ToolCall.objects.filter(name="write_file").count() == 2


def test_another_users_identical_call_is_never_joined_it_asks_in_their_own_conversation(alice, mallory, agent, settings):
    settings.HITL_MCP_WAIT_SECONDS = 0.5
    call_and_collect(ApiToken.issue(alice), "write_file", WRITE)
    theirs = Approval.objects.get()

    result, _ = call_and_collect(ApiToken.issue(mallory), "write_file", WRITE)

    mine = Approval.objects.exclude(pk=theirs.pk).get()
    assert f"approval #{mine.pk} " in text_of(result)
    assert mine.conversation.owner == mallory and theirs.conversation.owner == alice
    assert mine.conversation_id != theirs.conversation_id


def test_a_session_id_sent_by_another_client_joins_nothing_of_theirs(alice, mallory, agent, settings):
    """No sessions are kept: whatever Mcp-Session-Id a request carries, the call is its token's user's."""
    settings.HITL_MCP_WAIT_SECONDS = 0.5
    call_and_collect(ApiToken.issue(alice), "write_file", WRITE)
    alices = Conversation.objects.get(source="mcp")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "calculator", "arguments": {"expression": "2 + 2"}}}

    for session in (str(alices.pk), alices.external_thread, "0" * 32):
        response = call("POST", "/mcp/demo/", token=ApiToken.issue(mallory), json=body, headers={"Mcp-Session-Id": session})
        assert response.status_code in (200, 400, 404), response.text

    assert alices.messages.count() == 1
    assert not ToolCall.objects.filter(message__conversation=alices, name="calculator").exists()
    assert not ToolCall.objects.filter(message__conversation__owner=alice, name="calculator").exists()


def test_an_approval_that_expires_while_the_call_waits_says_so_and_nothing_runs(alice, agent, settings):
    agent.approval_timeout_seconds = 1
    agent.save()
    settings.HITL_MCP_WAIT_SECONDS = 30

    def beat():  # the expiry sweep, as Celery beat runs it
        try:
            wait_until(lambda: Approval.objects.filter(status="pending").exists(), timeout=20, message="a pending approval")
            wait_until(lambda: expire_overdue(), timeout=20, message="the approval to expire")
        finally:
            connections.close_all()

    sweeper = threading.Thread(target=beat)
    sweeper.start()
    result, _ = call_and_collect(ApiToken.issue(alice), "write_file", WRITE)
    sweeper.join()

    approval = Approval.objects.get()
    assert result.is_error is True
    assert text_of(result).startswith(f"write_file was not run: nobody decided approval #{approval.pk} in time. Expired at ")
    assert (approval.status, approval.tool_call.status) == ("expired", "expired")


def test_an_internal_error_says_internal_error_with_an_id_that_the_log_carries(alice, agent, caplog):
    token = ApiToken.issue(alice)
    with connection.cursor() as cursor:  # the database loses a table under the running server
        cursor.execute("ALTER TABLE approvals_approval RENAME TO approvals_approval_gone")
    try:
        error = rpc(token, "tools/call", {"name": "write_file", "arguments": WRITE})["error"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE approvals_approval_gone RENAME TO approvals_approval")

    error_id = error["message"].removeprefix("internal error (id ").removesuffix(")")
    assert error["code"] == types.INTERNAL_ERROR and error["message"] == f"internal error (id {error_id})" and len(error_id) == 12
    assert "approvals_approval" not in json.dumps(error)
    [logged] = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged.exc_info and "approvals_approval" in str(logged.exc_info[1])


def test_calls_over_the_per_token_cap_get_a_too_many_error_and_other_tokens_are_not_counted(alice, mallory, agent, settings):
    settings.HITL_MCP_CALLS_PER_TOKEN, settings.HITL_MCP_WAIT_SECONDS = 1, 3
    alices, mallorys = ApiToken.issue(alice), ApiToken.issue(mallory)

    def pending_exists():
        try:
            wait_until(lambda: Approval.objects.filter(status="pending").exists(), timeout=20, message="a pending approval")
        finally:
            connections.close_all()

    async def both():
        async def waiting(client):
            return await client.call_tool("write_file", WRITE)

        async def over_the_cap(client):
            await asyncio.to_thread(pending_exists)
            with pytest.raises(McpError) as refused:
                await client.call_tool("calculator", {"expression": "1 + 1"})
            return refused.value

        async def another_token(client):
            await asyncio.to_thread(pending_exists)
            return await client.call_tool("calculator", {"expression": "2 + 2"})

        return await asyncio.gather(with_client(alices, waiting), with_client(alices, over_the_cap), with_client(mallorys, another_token))

    waited, refused, others = asyncio.run(both())

    assert refused.error.code == -32029 and "already has 1 MCP calls in flight" in refused.error.message
    assert "No decision yet" in text_of(waited) and text_of(others) == "2 + 2 = 4"
    assert not ToolCall.objects.filter(message__conversation__owner=alice, name="calculator").exists()
    assert sdk(alices, lambda client: client.call_tool("calculator", {"expression": "3 + 3"})).is_error is False  # freed


def test_requests_the_gateway_does_not_serve_are_refused_clearly_and_store_nothing(alice, agent):
    token = ApiToken.issue(alice)

    for method in ("GET", "DELETE", "PUT"):
        response = call(method, "/mcp/demo/", token=token)  # no session to end, no stream to open
        assert (response.status_code, response.headers["allow"]) == (405, "POST"), method
    for params in ({"name": "calculator", "arguments": ["1 + 1"]}, {"name": "calculator", "arguments": "1 + 1"}, {"arguments": {}},
                   {"name": "calc\u0000ulator", "arguments": {}}, {"name": "x" * 300, "arguments": {}}):
        assert rpc(token, "tools/call", params)["error"]["code"] == types.INVALID_PARAMS, params
    with_nul = rpc(token, "tools/call", {"name": "calculator", "arguments": {"expression": "1\u0000"}})["result"]
    assert with_nul["isError"] is True and "NUL" in with_nul["content"][0]["text"]
    assert not ToolCall.objects.exists()
