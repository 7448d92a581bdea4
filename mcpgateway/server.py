"""The MCP server every agent is (the SDK's low-level Server: one for all agents, since who calls and
which agent come with each HTTP request, put in its scope by hitl.mounted.Authenticate).

`tools/call` asks for the call (mcpgateway.calls), then waits for it to be answerable: it listens
to the conversation's channel-layer group (what the page's cards are pushed to, best effort) and
reads the rows again at least every second, each time settling the call (chat.outside.settle:
the decision applied, an approved call run here). While it waits it sends progress notifications
(when the request asked for them). The wait ends with the call's answer, or when its approval
expires, or after HITL_MCP_WAIT_SECONDS with an answer that says to call again: an identical call
joins the same approval. Nothing of the wait is kept in memory that a restart would lose: a client
whose daphne restarted calls again and is answered from the rows."""
import asyncio
import logging
import time
import uuid
from collections import Counter

import mcp_types as types
from django.conf import settings
from django.utils import timezone

from chat.outside import InvalidRequest
from core.live import Listening, conversation_group
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from . import calls
from .pool import database

logger = logging.getLogger(__name__)

RECHECK_SECONDS = 1.0
PROGRESS_SECONDS = 5.0  # a notification at most this often while nothing changes
EXPIRY_GRACE_SECONDS = 5.0  # the beat sweep expires a pending approval within about a second
TOO_MANY = -32029  # a server-defined JSON-RPC code, 429 as HTTP says it (as agentlink.limits answers)
# Calls in flight in this process (one event loop: no lock), by API token and by user. The user's cap
# (HITL_MCP_CALLS_PER_USER, all their tokens together) is what is fair between people: a second token
# does not double anyone's share of the gateway's threads and waits. The token's, below it, keeps one
# client (a runaway loop) from spending all of its user's share, so their other clients get through.
IN_FLIGHT: Counter = Counter()
IN_FLIGHT_BY_USER: Counter = Counter()


def caller(ctx: ServerRequestContext) -> tuple:
    """The token's user, the agent and the token's hash, as Authenticate found them."""
    scope = ctx.request.scope
    return scope["hitl_user"], scope["hitl_agent"], scope["hitl_token"]


def thread_of(token_hash: str) -> str:
    """One conversation per API token and agent: the gateway keeps no MCP sessions (a restarted or
    another daphne must answer any request), so a token is the client's stable identity."""
    return f"MCP client (token {token_hash[:8]})"


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    _, agent, _ = caller(ctx)
    return types.ListToolsResult(tools=await database(calls.listed_tools)(agent))


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    user, agent, token = caller(ctx)
    cap = settings.HITL_MCP_CALLS_PER_TOKEN
    if IN_FLIGHT[token] >= cap:
        raise MCPError(code=TOO_MANY, message=f"Too many calls: this token already has {cap} MCP calls in flight at "
                       "once (the cap); retry once one of them is answered.", data={"limit": cap})
    cap = settings.HITL_MCP_CALLS_PER_USER
    if IN_FLIGHT_BY_USER[user.pk] >= cap:
        raise MCPError(code=TOO_MANY, message=f"Too many calls: your API tokens together already have {cap} MCP calls "
                       "in flight at once (the cap per user); retry once one of them is answered.", data={"limit": cap})
    IN_FLIGHT[token] += 1
    IN_FLIGHT_BY_USER[user.pk] += 1
    try:
        arguments = params.arguments if params.arguments is not None else {}
        try:
            asked = await database(calls.ask)(user, agent, name=params.name, arguments=arguments, thread=thread_of(token))
        except InvalidRequest as exc:
            if exc.field in ("name", "tool"):  # no tool of this agent's: the request is wrong, not the call
                raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        return await _answer(ctx, asked)
    finally:
        for held, key in ((IN_FLIGHT, token), (IN_FLIGHT_BY_USER, user.pk)):
            held[key] -= 1
            if held[key] <= 0:
                del held[key]


async def _answer(ctx: ServerRequestContext, asked: calls.Asked) -> types.CallToolResult:
    started = time.monotonic()
    longest = started + settings.HITL_MCP_WAIT_SECONDS
    async with Listening(conversation_group(asked.conversation_id)) as listening:
        told, told_at = "", 0.0
        while True:
            reading = await database(calls.settle)(asked.call_id)
            if reading.result is not None:
                return reading.result
            now = time.monotonic()
            deadline = longest
            if reading.expires_at is not None:  # a pending approval: until the sweep has expired it
                left = (reading.expires_at - timezone.now()).total_seconds() + EXPIRY_GRACE_SECONDS
                deadline = min(longest, now + max(left, 0.0))
            if now >= deadline:
                return await database(calls.still_waiting)(asked.call_id)
            if reading.waiting != told or now - told_at >= PROGRESS_SECONDS:
                told, told_at = reading.waiting, now
                await ctx.session.report_progress(round(now - started, 1), None, reading.waiting)
            await listening.wait(min(RECHECK_SECONDS, deadline - now))


def guarded(handler):
    """An exception that is not an MCP error becomes "internal error (id …)": the id is logged with
    the traceback, and nothing of the exception reaches the client."""

    async def call(ctx, params):
        try:
            return await handler(ctx, params)
        except MCPError:
            raise
        except Exception:
            error_id = uuid.uuid4().hex[:12]
            logger.exception("mcp internal error %s in %s", error_id, handler.__name__)
            raise MCPError(code=types.INTERNAL_ERROR, message=f"internal error (id {error_id})", data={"error_id": error_id}) from None

    call.__name__ = handler.__name__
    return call


server = Server(
    "hitl",
    title="Human-approved tools",
    instructions="Every call goes through this agent's approval policy: a call that needs a human waits for "
    "their decision, then returns the tool's result, or an error saying who rejected it and why.",
    on_list_tools=guarded(list_tools),
    on_call_tool=guarded(call_tool),
)
