"""The MCP gateway's ASGI app, which hitl.asgi routes `/mcp/` to, beside Django: every agent is an
MCP server at `/mcp/<slug>/` (streamable HTTP; the SDK's transport and dispatch, mcpgateway.server
acting). Every request carries an API token (`Authorization: Bearer …`, the JSON API's tokens) and
acts as its user; an agent that user may not use is a 404, like one that does not exist
(hitl.mounted's guards, shared with A2A).

Stateless: the SDK's session manager keeps a stateful session's transport in the memory of the one
process that opened it, which another daphne (or this one, restarted) would answer with 404. Here
every POST is served on its own (the 2026-07-28 protocol is per request anyway; an older client's
`initialize` is answered and each later request stands alone), so any daphne answers any request,
and what a call waits for lives in the database. The manager has no lifespan to run in (daphne
sends none), so each request gets one of its own: in stateless mode it holds no state between
requests, and its task group ends the request's server task with the request."""
import re

from starlette.middleware.trustedhost import TrustedHostMiddleware

from hitl.mounted import Authenticate, Secure, allowed_hosts, error_response
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from .pool import database
from .server import server

PATH = re.compile(r"/mcp/(?P<slug>[-a-zA-Z0-9_]{1,50})/?")
MAX_BODY_BYTES = 1_000_000


async def serve(scope, receive, send) -> None:
    if scope["method"] != "POST":
        # No session to end (DELETE) and nothing sent outside a request's answer (a GET stream),
        # which the protocol answers with 405; a GET stream held open would cost a task for nothing.
        return await error_response(send, 405, "This MCP server keeps no sessions and no stream: POST each JSON-RPC request.",
                                    headers=[(b"allow", b"POST")])
    manager = StreamableHTTPSessionManager(app=server, stateless=True, max_request_body_size=MAX_BODY_BYTES)
    async with manager.run():
        await manager.handle_request(scope, receive, send)


authenticated = Authenticate(
    serve, path=PATH, database=database, max_body=MAX_BODY_BYTES,
    not_found="Not found: MCP servers live at /mcp/<agent slug>/.",
)
application = Secure(TrustedHostMiddleware(authenticated, allowed_hosts=allowed_hosts()), name="MCP")
