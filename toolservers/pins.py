"""Pinned tool definitions: what a server said of each tool (its description, input schema and
annotations) when an admin approved it, so a server that changes a tool later (the "rug pull" of
the MCP security guidance) cannot slip new words to the model or new hints to the gate.

The first listing of a server pins every tool it lists (trust on first use: the admin who added the
server approved it). Later listings pin nothing: a changed tool, or one added since, stays disabled
(not offered, a call to it refused) until an admin accepts what is listed now on its admin page."""
import difflib
import hashlib
import json

from django.db import transaction
from django.utils import timezone

from approvals.policy import versions as policy_versions
from core.visible import reveal_json

from .models import ToolPin, ToolServer


class ListedAgain(Exception):
    """The server's listing changed since the admin was shown it: nothing was accepted."""


def definition_of(tool: dict) -> dict:
    """The part of a listed tool that is pinned: what the model reads and what the gate may use."""
    return {
        "description": tool.get("description") or "",
        "input_schema": tool.get("input_schema") or {},
        "annotations": tool.get("annotations") or None,
    }


def definition_hash(tool: dict) -> str:
    """sha256 of the definition as canonical JSON (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(definition_of(tool), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def pin_listing(server: ToolServer, tools: list[dict], *, first: bool) -> None:
    """Keep a pin for each listed tool: approved as listed on the server's first listing, unapproved
    (empty) for a tool that appears later. Existing pins never change here: only an admin's accept does."""
    now = timezone.now()
    kept = set(ToolPin.objects.filter(server=server).values_list("name", flat=True))  # a pin already kept stays as it is
    # One by one, not in bulk: each pin's history and, for them all, one policy version. The caller
    # holds the server's row, so no other listing adds the same pin meanwhile.
    with policy_versions.recording(note=f"listing of {server.name}"):
        for tool in tools:
            if tool["name"] not in kept:
                kept.add(tool["name"])
                ToolPin.objects.create(
                    server=server,
                    name=tool["name"],
                    definition=definition_of(tool) if first else None,
                    definition_hash=definition_hash(tool) if first else "",
                    approved_at=now if first else None,
                )


def approved_hashes(server_ids: list[int]) -> dict[tuple[int, str], str]:
    """(server id, tool name) → the hash of the definition an admin approved ("" for none yet)."""
    pins = ToolPin.objects.filter(server_id__in=server_ids).values_list("server_id", "name", "definition_hash")
    return {(server_id, name): digest for server_id, name, digest in pins}


def unapproved_tools(server: ToolServer) -> list[str]:
    """The server's listed tools whose definition is not the one an admin approved."""
    approved = approved_hashes([server.pk])
    return [tool["name"] for tool in server.tools if approved.get((server.pk, tool["name"])) != definition_hash(tool)]


def accept(pin_id: int, *, user, shown_hash: str) -> ToolPin:
    """An admin accepts the definition listed now, the one whose hash they were shown: if the server
    was listed again since with something else, nothing is accepted (ListedAgain) and they look again.
    The server row is locked as a refresh locks it, so a listing cannot land between check and write."""
    with transaction.atomic():
        pin = ToolPin.objects.select_for_update().select_related("server").get(pk=pin_id)
        server = ToolServer.objects.select_for_update().get(pk=pin.server_id)
        listed = server.tool(pin.name)
        if listed is None or definition_hash(listed) != shown_hash:
            raise ListedAgain(f"{server.name} was listed again since this page was shown: look at the difference again.")
        pin.definition, pin.definition_hash, pin.approved_by, pin.approved_at = definition_of(listed), shown_hash, user, timezone.now()
        pin._history_user = user
        pin.save(update_fields=["definition", "definition_hash", "approved_by", "approved_at"])  # a policy version
    pin.refresh_from_db()
    return pin


def difference(pin: ToolPin, listed: dict | None) -> list[str]:
    """The approved definition against the listed one, as unified diff lines of pretty JSON (with
    invisible and direction-changing characters revealed, since they are how a description hides text)."""
    approved = reveal_json(pin.definition).splitlines() if pin.definition is not None else []
    now = reveal_json(definition_of(listed)).splitlines() if listed is not None else []
    return list(
        difflib.unified_diff(
            approved, now, "approved" if pin.definition is not None else "(nothing approved yet)",
            "listed now" if listed is not None else "(not listed now)", lineterm="", n=max(len(approved), len(now)),
        )
    )
