"""The demo tool servers that `make run` adds to the demo agent (also used by the tests)."""
import sys

from django.conf import settings

from .models import AgentToolServer, ToolServer


def ensure_notes_server(agent, *, notes_dir=None) -> ToolServer:
    """`notes`: this project's own MCP server (toolservers.demo_server) over stdio, its notes in
    var/demo-notes; linked to `agent` with no `require_approval` list, so the server's annotations
    decide: listing and reading run freely, writing and deleting wait for a human."""
    server, _ = ToolServer.objects.update_or_create(
        name="notes",
        defaults={
            "transport": ToolServer.Transport.STDIO,
            "command": sys.executable,
            "args": ["-m", "toolservers.demo_server"],
            "env": {"NOTES_DIR": str(notes_dir or settings.VAR_DIR / "demo-notes"), "PYTHONPATH": str(settings.BASE_DIR)},
            "enabled": True,
        },
    )
    AgentToolServer.objects.update_or_create(agent=agent, server=server, defaults={"tools": [], "require_approval": None})
    return server
