"""Listing a tool server's tools and keeping the list (ToolServer.tools), so a model call never
waits for a server to say what it offers."""
from django.utils import timezone

from . import client
from .models import ToolServer


def refresh(server: ToolServer) -> list[dict]:
    """List the server's tools now and keep them; a server that cannot be reached keeps its last
    list, and the error is kept beside it (shown in the admin). Raises ServerUnavailable."""
    try:
        tools = client.list_tools(server)
    except client.ServerUnavailable as exc:
        ToolServer.objects.filter(pk=server.pk).update(refresh_error=str(exc))
        server.refresh_error = str(exc)
        raise
    now = timezone.now()
    ToolServer.objects.filter(pk=server.pk).update(tools=tools, refreshed_at=now, refresh_error="")
    server.tools, server.refreshed_at, server.refresh_error = tools, now, ""
    return tools
