"""The A2A side of the site: a Starlette app that hitl.asgi routes `/a2a/` to, beside Django.

- `POST /a2a/<slug>/`: JSON-RPC (protocol 1.0, and the 0.3 method names and state spelling), with
  streaming over server-sent events; the SDK's dispatcher parses and answers, agentlink.handler acts.
- `GET /a2a/<slug>/.well-known/agent-card.json`: the agent's card, cacheable (ETag, max-age) as the
  specification asks (§8.6), privately: it is read with a token, and only its user may use the agent.

Every request carries an API token (`Authorization: Bearer …`, the JSON API's tokens) and acts as
its user; an agent that user may not use is a 404, like an agent that does not exist (the
guards in front of the routes are hitl.mounted's, shared with the MCP gateway). Each token's, and each
user's (all their tokens together), calls and open streams are capped (agentlink.limits); the database work runs on A2A's own threads
(agentlink.pool)."""
import hashlib
import logging
import re
import uuid

from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from hitl.mounted import Authenticate, Secure, allowed_hosts

from .cards import agent_card
from .handler import AgentHandler
from .limits import Throttle
from .pool import database

logger = logging.getLogger(__name__)

PATH = re.compile(r"/a2a/(?P<slug>[-a-zA-Z0-9_]{1,50})/(?P<rest>.*)")
CARD_PATH = re.compile(r"/a2a/[-a-zA-Z0-9_]{1,50}/\.well-known/agent-card\.json")  # its answers say how long to keep them
MAX_BODY_BYTES = 1_000_000
CARD_MAX_AGE_SECONDS = 300  # a client reads a changed card (new tools, a new policy) within five minutes


class CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context (headers, extensions) plus who is calling and which agent they call."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["hitl_user"] = request.scope["hitl_user"]
        context.state["hitl_agent"] = request.scope["hitl_agent"]
        # Which client is calling, for what each one was shown (runs.note_shown): its token, hashed.
        context.state["hitl_client"] = request.scope["hitl_token"][:16]
        return context


async def card(request: Request) -> Response:
    """The card, with an ETag (a hash of its bytes: it changes when the agent's tools or policy
    do), 304 to a client that holds it already (If-None-Match). Cache-Control is `private`: only a
    token's user may read it (hitl.mounted keeps it, where every other answer is no-store), and
    `Vary: Authorization` for a client that calls with several tokens."""
    agent = request.scope["hitl_agent"]
    url = f"{str(request.base_url).rstrip('/')}/a2a/{agent.slug}/"
    try:
        response = JSONResponse(agent_card_to_dict(await database(agent_card)(agent, url)))
    except Exception:
        error_id = uuid.uuid4().hex[:12]
        logger.exception("a2a internal error %s (agent card of %s)", error_id, agent.slug)
        return JSONResponse({"detail": f"internal error (id {error_id})", "error_id": error_id}, status_code=500)
    etag = f'"{hashlib.sha256(response.body).hexdigest()[:32]}"'
    caching = {"ETag": etag, "Cache-Control": f"private, max-age={CARD_MAX_AGE_SECONDS}", "Vary": "Authorization"}
    if etag in _etags(request.headers.get("if-none-match", "")) or request.headers.get("if-none-match", "").strip() == "*":
        return Response(status_code=304, headers=caching)
    response.headers.update(caching)
    return response


def _etags(header: str) -> set[str]:
    """The entity tags of an If-None-Match header; a weak one (W/"…") matches too (RFC 9110 §13.1.2)."""
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


routes = [
    Route("/a2a/{slug}/.well-known/agent-card.json", card, methods=["GET"]),
    *create_jsonrpc_routes(AgentHandler(), "/a2a/{slug}/", context_builder=CallContextBuilder(), enable_v0_3_compat=True),
]


authenticated = Authenticate(
    Throttle(Starlette(routes=routes)), path=PATH, database=database, max_body=MAX_BODY_BYTES,
    not_found="Not found: A2A agents live at /a2a/<agent slug>/.",
)
application = Secure(TrustedHostMiddleware(authenticated, allowed_hosts=allowed_hosts()), name="A2A", cacheable=CARD_PATH)
