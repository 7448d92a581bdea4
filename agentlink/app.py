"""The A2A side of the site: a Starlette app that hitl.asgi routes `/a2a/` to, beside Django.

- `POST /a2a/<slug>/`: JSON-RPC (protocol 1.0, and the 0.3 method names and state spelling), with
  streaming over server-sent events; the SDK's dispatcher parses and answers, agentlink.handler acts.
- `GET /a2a/<slug>/.well-known/agent-card.json`: the agent's card.

Every request carries an API token (`Authorization: Bearer …`, the JSON API's tokens) and acts as
its user; an agent that user may not use is a 404, like an agent that does not exist. Each token's
calls and open streams are capped (agentlink.limits); the database work runs on A2A's own threads
(agentlink.pool)."""
import json
import logging
import re
import uuid

from django.conf import settings
from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from chat.models import ApiToken
from chat.selectors import agent_for

from .cards import agent_card
from .handler import AgentHandler
from .limits import Throttle
from .pool import database

logger = logging.getLogger(__name__)

PATH = re.compile(r"/a2a/(?P<slug>[-a-zA-Z0-9_]{1,50})/(?P<rest>.*)")
MAX_BODY_BYTES = 1_000_000


class CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (headers, extensions) plus who is calling and which agent they call."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["hitl_user"] = request.scope["hitl_user"]
        context.state["hitl_agent"] = request.scope["hitl_agent"]
        # Which client is calling, for what each one was shown (runs.note_shown): its token, hashed.
        context.state["hitl_client"] = request.scope["hitl_token"][:16]
        return context


async def card(request: Request) -> JSONResponse:
    agent = request.scope["hitl_agent"]
    url = f"{str(request.base_url).rstrip('/')}/a2a/{agent.slug}/"
    try:
        return JSONResponse(agent_card_to_dict(await database(agent_card)(agent, url)))
    except Exception:
        error_id = uuid.uuid4().hex[:12]
        logger.exception("a2a internal error %s (agent card of %s)", error_id, agent.slug)
        return JSONResponse({"detail": f"internal error (id {error_id})", "error_id": error_id}, status_code=500)


class Authenticate:
    """Pure ASGI: the bearer token's user and the agent, before any route runs; and a cap on the
    body's declared length, before the JSON-RPC dispatcher reads it."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        match = PATH.fullmatch(scope["path"])
        if match is None:
            return await _error(send, 404, "Not found: A2A agents live at /a2a/<agent slug>/.")
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if scope["method"] == "POST" and length is None:
            return await _error(send, 411, "Send the request with a Content-Length.")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return await _error(send, 413, f"The request body is over {MAX_BODY_BYTES} bytes.")
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, key = authorization.partition(" ")
        user = await _user_for(key.strip()) if scheme.lower() == "bearer" and key.strip() else None
        if user is None:
            return await _error(send, 401, "An API token is required: Authorization: Bearer <token>.", bearer=True)
        agent = await database(agent_for)(user, match["slug"])
        if agent is None:
            return await _error(send, 404, "No such agent.")
        scope["hitl_user"], scope["hitl_agent"] = user, agent
        scope["hitl_token"] = ApiToken.hash_key(key.strip())  # what agentlink.limits counts by
        await self.app(scope, receive, send)  # daphne reads no more than the Content-Length


_user_for = database(ApiToken.user_for)


async def _error(send, status: int, detail: str, *, bearer: bool = False) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


routes = [
    Route("/a2a/{slug}/.well-known/agent-card.json", card, methods=["GET"]),
    *create_jsonrpc_routes(AgentHandler(), "/a2a/{slug}/", context_builder=CallContextBuilder(), enable_v0_3_compat=True),
]


class Secure:
    """What Django's SecurityMiddleware does for the pages, for the A2A responses: HTTPS only where
    the site redirects to it (a token already sent in clear is refused, not redirected), HSTS,
    nosniff and no caching."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if settings.SECURE_SSL_REDIRECT and not _is_https(scope):
            return await _error(send, 403, "A2A is served over HTTPS only.")
        extra = [(b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"), (b"referrer-policy", b"same-origin")]
        if settings.SECURE_HSTS_SECONDS and _is_https(scope):
            hsts = f"max-age={settings.SECURE_HSTS_SECONDS}" + ("; includeSubDomains" if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS else "")
            extra.append((b"strict-transport-security", hsts.encode()))

        async def send_secured(message):
            if message["type"] == "http.response.start":
                message = message | {"headers": list(message.get("headers", [])) + extra}
            await send(message)

        await self.app(scope, receive, send_secured)


def _is_https(scope) -> bool:
    if scope.get("scheme") == "https":
        return True
    header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if header:
        name = header[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        return dict(scope.get("headers") or []).get(name, b"").decode("latin-1").split(",")[0].strip() == header[1]
    return False


def _allowed_hosts() -> list[str]:
    """Django's ALLOWED_HOSTS as Starlette spells them (".example.com" is "*.example.com" too)."""
    hosts = []
    for host in settings.ALLOWED_HOSTS:
        hosts += [host.lstrip("."), "*" + host] if host.startswith(".") else [host, host.strip("[]")]
    return hosts


application = Secure(TrustedHostMiddleware(Authenticate(Throttle(Starlette(routes=routes))), allowed_hosts=_allowed_hosts()))
