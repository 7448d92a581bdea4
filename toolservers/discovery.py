"""Listing a tool server's tools and keeping the list (ToolServer.tools), so a model call never
waits for a server to say what it offers; the first listing pins each tool's definition (pins)."""
from django.db import transaction
from django.utils import timezone

from . import client, pins
from .models import ToolServer


def refresh(server: ToolServer) -> list[dict]:
    """List the server's tools now and keep them; a server that cannot be reached keeps its last
    list, and the error is kept beside it (shown in the admin). Raises ServerUnavailable.

    The list is kept whatever it says: a tool whose definition differs from the pinned one is
    disabled where tools are offered (specs), not here, so the admin can see and accept the change."""
    try:
        tools = client.list_tools(server)
    except client.ServerUnavailable as exc:
        ToolServer.objects.filter(pk=server.pk).update(refresh_error=str(exc))
        server.refresh_error = str(exc)
        raise
    now = timezone.now()
    with transaction.atomic():
        # Locked, so two refreshes cannot both take themselves for the first listing, and an
        # admin's accept (pins.accept) never checks a listing that is being replaced.
        first = ToolServer.objects.select_for_update().values_list("refreshed_at", flat=True).get(pk=server.pk) is None
        ToolServer.objects.filter(pk=server.pk).update(tools=tools, refreshed_at=now, refresh_error="")
        pins.pin_listing(server, tools, first=first)
    server.tools, server.refreshed_at, server.refresh_error = tools, now, ""
    return tools
