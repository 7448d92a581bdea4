"""Caps on A2A: how many calls may run at once and how many streams may stay open, per API token
(HITL_A2A_CALLS_PER_TOKEN, HITL_A2A_STREAMS_PER_TOKEN) and per user, all of the user's tokens
together (HITL_A2A_CALLS_PER_USER, HITL_A2A_STREAMS_PER_USER), so that no one takes the pool's
threads, or the channel layer's listeners, from everyone else. Counted per daphne process (one
event loop: no lock needed). Over a cap the request is answered at once with a JSON-RPC error
(TOO_MANY, the 429 of JSON-RPC) that says when to retry, and a Retry-After header."""
import json
from collections import Counter

from django.conf import settings

from core.inputs import ANY_TEXT, BadInput, parse_json

STREAM_METHODS = {"SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"}
TOO_MANY = -32029  # a server-defined JSON-RPC code (-32000 to -32099), 429 as HTTP says it
PARSE_ERROR = -32700  # JSON-RPC's own: the body is not JSON (or not JSON we take: too deep, a lone surrogate)
RETRY_SECONDS = 1
A2A_DEPTH = 256  # a message's data parts are the client's own JSON
CAPS = {  # the setting that caps each kind of request, per token and per user
    ("calls", "token"): "HITL_A2A_CALLS_PER_TOKEN", ("streams", "token"): "HITL_A2A_STREAMS_PER_TOKEN",
    ("calls", "user"): "HITL_A2A_CALLS_PER_USER", ("streams", "user"): "HITL_A2A_STREAMS_PER_USER",
}


class Throttle:
    """Pure ASGI, after Authenticate (which puts the token's hash in `scope["hitl_token"]` and its
    user in `scope["hitl_user"]`, before any body is read): reads the body (already capped in
    length) to tell a stream from a call, holds a slot of the token's and one of its user's for as
    long as the response lasts (a stream's whole life, a blocking send's wait), and hands the same
    body on.

    Both caps, because they guard different things. The user's is what is fair between people: a
    second token (another client, another agent) does not double a user's share, so a user with
    many tokens cannot hold every stream while another user's calls wait. The token's, below it,
    keeps one client (a runaway loop) from spending all of its user's share, so the user's other
    clients still get through. By default a user may use two tokens' worth."""

    def __init__(self, app):
        self.app = app
        self.held = {"calls": Counter(), "streams": Counter()}  # by token hash
        self.held_by_user = {"calls": Counter(), "streams": Counter()}  # by user id

    async def __call__(self, scope, receive, send):
        token = scope.get("hitl_token")
        if scope["type"] != "http" or token is None:
            return await self.app(scope, receive, send)
        body, receive = await _buffered(receive) if scope["method"] == "POST" else (b"", receive)
        method, request_id, refused = _peek(body)
        if refused:
            # Answered here, as the specification's parse error: the SDK's own parser meets no
            # body we refused (one nested past our depth made it recurse into an internal error).
            return await _rpc_error(send, None, {"code": PARSE_ERROR, "message": f"Parse error: {refused}"})
        kind = "streams" if method in STREAM_METHODS else "calls"
        slots = [(self.held[kind], token, "token")]
        if scope.get("hitl_user") is not None:
            slots.append((self.held_by_user[kind], scope["hitl_user"].pk, "user"))
        for held, key, whose in slots:
            cap = getattr(settings, CAPS[kind, whose])
            if held[key] >= cap:
                return await _too_many(send, kind, cap, request_id, whose=whose)
        for held, key, _ in slots:
            held[key] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            for held, key, _ in slots:
                held[key] -= 1
                if held[key] <= 0:
                    del held[key]


async def _buffered(receive):
    """The whole body, and a receive that gives it again, then what the client sends next (its
    disconnect, which a stream listens for)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), _replay(b"".join(chunks), receive, first=message)
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks), _replay(b"".join(chunks), receive)


def _replay(body: bytes, receive, *, first: dict | None = None):
    pending = [first] if first else [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return pending.pop(0) if pending else await receive()

    return replayed


def _method(body: bytes) -> tuple[str, object]:
    """The JSON-RPC method and id of a request body ("" and None for one that is not JSON-RPC)."""
    method, request_id, _ = _peek(body)
    return method, request_id


def _peek(body: bytes) -> tuple[str, object, str]:
    """The method and id, and why the body is refused as JSON ("" when it is not)."""
    try:
        # Any text: a NUL or a lone surrogate inside a field is the handler's to refuse, naming the field.
        request = parse_json(body, most_bytes=len(body), most_depth=A2A_DEPTH, text=ANY_TEXT) if body else None
    except BadInput as exc:
        return "", None, str(exc)
    if not isinstance(request, dict):
        return "", None, ""
    method, request_id = request.get("method"), request.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        request_id = None
    return (method if isinstance(method, str) else ""), request_id, ""


async def _too_many(send, kind: str, cap: int, request_id, *, whose: str) -> None:
    what = "streams open" if kind == "streams" else "calls running"
    advice = "close one of them, or retry" if kind == "streams" else "retry"
    if whose == "token":
        holder, which = "this token already has", "the cap"
    else:
        holder, which = "your API tokens together already have", "the cap per user"
    error = {
        "code": TOO_MANY,
        "message": f"Too many requests: {holder} {cap} A2A {what} at once ({which}); {advice} in {RETRY_SECONDS} s.",
        "data": {"retry_after_seconds": RETRY_SECONDS, "limit": cap, "kind": kind},
    }
    await _rpc_error(send, request_id, error, [(b"retry-after", str(RETRY_SECONDS).encode())])


async def _rpc_error(send, request_id, error: dict, headers: list | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
