"""The one way sync code pushes rendered HTML to browsers: an `html.push` event to a group."""
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

APPROVALS_GROUP = "approvals"


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


def push_now(group: str, html: str) -> None:
    """Send at once: for transient things (streamed text) that no database row backs."""
    async_to_sync(get_channel_layer().group_send)(group, {"type": "html.push", "html": html})


def push(group: str, html: str) -> None:
    """Send after the current transaction commits, so a tab never shows what the database lacks.
    A push that fails is logged and lost: pages re-read the database when their socket reconnects."""
    transaction.on_commit(lambda: push_now(group, html), robust=True)
