"""Talking to an MCP server from synchronous code (a Celery worker thread, the admin, a command):
list its tools, call one. Each call opens its own connection through the `mcp` SDK's `Client` (a
stdio server is started for the call and stopped after it) and runs in its own event loop, so no
connection outlives a call and a worker restart loses nothing but the call in flight.

Whatever goes wrong on the way (the server is down, times out, speaks something else) is a
ServerUnavailable with words a user can read; what the tool itself reports (`isError`) is a result."""
import asyncio
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ElicitResult, EmbeddedResource, ImageContent, InputRequiredResult, ResourceLink, TextContent

logger = logging.getLogger(__name__)

MAX_RESULT_CHARS = 20_000  # what the model and the card get of a tool's output at most
PASSED_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")


class ServerUnavailable(Exception):
    """The server could not be reached, timed out, or answered with something that is not MCP."""


class Refused(ServerUnavailable):
    """The server answered with a protocol error (say, a request state it no longer accepts)."""


@dataclass(frozen=True)
class CallOutcome:
    """A tool's answer: its text (shortened, non-text content described), whether the tool said it
    failed, or, instead of either, the server's request for input (`input_required`: the requests and
    the opaque state to echo back when calling again with the answers)."""

    text: str = ""
    is_error: bool = False
    input_required: dict | None = None


def list_tools(server) -> list[dict]:
    """The server's tools: [{name, description, input_schema, annotations}], every page of them."""

    async def listing(client: Client) -> list[dict]:
        tools, cursor = [], None
        for _ in range(100):  # a server whose pages never end cannot hang the refresh
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools += [
                {
                    "name": tool.name,
                    "description": tool.description or "",
                    "input_schema": tool.input_schema,
                    "annotations": tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None,
                }
                for tool in page.tools
            ]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return _run(server, listing)


def call_tool(server, name: str, arguments: dict, *, input_responses: dict | None = None, request_state: str | None = None) -> CallOutcome:
    """Call one tool. An input request comes back as it is (never answered here: a human answers
    it, maybe after a restart, and the call is made again with `input_responses` and `request_state`)."""

    async def calling(client: Client) -> CallOutcome:
        result = await client.session.call_tool(
            name, arguments, input_responses=input_responses, request_state=request_state, allow_input_required=True,
        )
        if isinstance(result, InputRequiredResult):
            requests = {key: request.model_dump(mode="json", by_alias=True, exclude_none=True) for key, request in (result.input_requests or {}).items()}
            return CallOutcome(input_required={"requests": requests, "request_state": result.request_state})
        if not isinstance(result, CallToolResult):
            raise ServerUnavailable(f"The server answered {name} with a {type(result).__name__}, not a tool result.")
        return CallOutcome(text=result_text(result), is_error=result.is_error)

    return _run(server, calling)


def result_text(result: CallToolResult) -> str:
    """The tool's content as text: text as it is, anything else named and sized, all shortened."""
    parts = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            parts.append(f"[an image, {block.mime_type}, {_decoded_size(block.data)} bytes: not shown]")
        elif isinstance(block, EmbeddedResource):
            text = getattr(block.resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[a resource, {block.resource.uri}: not shown]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[a link to {block.uri}]")
        else:
            parts.append(f"[{getattr(block, 'type', 'content')}: not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… ({len(text) - MAX_RESULT_CHARS} more characters not shown)"
    return text


def _in_own_loop(main):
    """anyio.run(main), in a thread of its own when this thread already runs an event loop (a caller
    inside async code, or a test process driving a browser): one thread cannot run two loops."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(main)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, main).result()


def _decoded_size(base64_text: str) -> int:
    text = base64_text.strip()
    return len(text) * 3 // 4 - len(text) + len(text.rstrip("="))


def _run(server, work):
    """Connect, do `work(client)`, disconnect, all within the server's timeout, in a fresh event loop."""

    async def main():
        with anyio.fail_after(server.timeout_seconds):
            async with _connected(server) as client:
                return await work(client)

    try:
        return _in_own_loop(main)
    except Exception as exc:  # a refused connection, a command that is not there, a garbled answer
        cause = _innermost(exc)
        if isinstance(cause, ServerUnavailable):
            raise cause from None
        if isinstance(cause, TimeoutError):
            raise ServerUnavailable(f"The tool server {server.name} did not answer within {server.timeout_seconds} s.") from None
        if isinstance(cause, MCPError):
            raise Refused(f"The tool server {server.name} refused the request: {cause}") from None
        logger.warning("tool server %s failed: %r", server.name, exc)
        raise ServerUnavailable(f"The tool server {server.name} is not reachable ({_reason(cause)}).") from None


@asynccontextmanager
async def _connected(server):
    """A connected Client: a stdio server started with only the environment it is given (plus PATH
    and the like), or a streamable HTTP endpoint with the server's headers."""
    if server.transport == "stdio":
        environment = {name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ} | server.env
        target = StdioServerParameters(command=server.command, args=server.args, env=environment)
        async with Client(target, **_options(server)) as client:
            yield client
        return
    async with httpx2.AsyncClient(headers=server.headers, timeout=server.timeout_seconds) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, **_options(server)) as client:
            yield client


def _options(server) -> dict:
    # The elicitation callback declares the form elicitation capability, so a server may ask for
    # input. On 2026-07-28 connections the request comes back as an `input_required` result (see
    # call_tool) and the callback is never called; an older server asking mid-call, while the call
    # cannot wait for a human, is told the request was cancelled.
    return {"read_timeout_seconds": server.timeout_seconds, "cache": None, "elicitation_callback": _cancel_mid_call}


async def _cancel_mid_call(context, params):
    logger.info("a tool server asked for input mid-call (an older protocol): cancelled")
    return ElicitResult(action="cancel")


def _innermost(exc: BaseException) -> BaseException:
    """The first failure inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    return f"{exc.__class__.__name__}: {exc}"[:300]
