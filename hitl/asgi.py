"""ASGI entry point: HTTP through Django, except `/a2a/` (the agents' A2A endpoints, a Starlette
app: agentlink.app), `/mcp/` (every agent as an MCP server: mcpgateway.app) and `/agui/` (every
agent as an AG-UI endpoint: aguilink.app); websockets through Channels (auth and origin checked)."""
import faulthandler
import gc
import os
import signal

from django.core.asgi import get_asgi_application

from core import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")
# `kill -USR1 <daphne's pid>` prints every thread's stack to its stderr: what a request that never
# answers waits for (the end-to-end tests ask for it when a request times out).
faulthandler.register(signal.SIGUSR1, all_threads=True)
telemetry.setup(web=True)  # if configured; before Django loads its middleware, which the instrumentation adds to
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs Django set up first)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agentlink.app import application as a2a_app  # noqa: E402
from aguilink.app import application as agui_app  # noqa: E402
from mcpgateway.app import application as mcp_app  # noqa: E402

from .routing import websocket_urlpatterns  # noqa: E402


async def http(scope, receive, send):
    path = scope["path"]
    app = (
        a2a_app if path.startswith("/a2a/") else mcp_app if path.startswith("/mcp/")
        else agui_app if path.startswith("/agui/") else django_asgi_app
    )
    await app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": telemetry.traced_http(http),  # a server span per request, when OpenTelemetry is on
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# Everything loaded by now lives as long as the process: out of the collector's sight, so that a
# full collection (every few hundred requests) walks what requests made, not the ~250,000 objects
# of the imports (~200 ms each): 6.7 → 5.2 ms of daphne's CPU a start (issue 24).
gc.collect()
gc.freeze()
