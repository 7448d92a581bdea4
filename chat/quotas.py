"""Per-user quotas on what costs money or fills the database: conversations started, messages
posted, model calls. Counted from the stored rows over a sliding window, so every process agrees
and nothing needs a cache; a limit of 0 turns a quota off."""
import math
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import Conversation, Message


class QuotaExceeded(Exception):
    """Too many in the window; `retry_after` is how many seconds until one more is allowed."""

    def __init__(self, what: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(f"You have reached the limit of {what}. Try again in {retry_after} s.")


def check_conversation(user) -> None:
    """Before a new conversation (whose first message is checked as any other)."""
    limit = settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR
    _check(Conversation.objects.filter(owner=user), limit, timedelta(hours=1), f"{limit} conversations an hour")


def check_message(user) -> None:
    """Before a message that may start the model (and before a retry, which calls it)."""
    limit = settings.HITL_QUOTA_MESSAGES_PER_MINUTE
    _check(Message.objects.filter(author=user), limit, timedelta(minutes=1), f"{limit} messages a minute")
    limit = settings.HITL_QUOTA_MODEL_CALLS_PER_HOUR
    # Each assistant message is one model call.
    calls = Message.objects.filter(conversation__owner=user, role=Message.Role.ASSISTANT)
    _check(calls, limit, timedelta(hours=1), f"{limit} model calls an hour")


def _check(rows, limit: int, window: timedelta, what: str) -> None:
    if not limit:
        return
    now = timezone.now()
    recent = rows.filter(created_at__gt=now - window).order_by("-created_at").values_list("created_at", flat=True)
    # The limit-th newest event in the window: once it leaves the window, one more is allowed.
    oldest_counted = next(iter(recent[limit - 1 : limit]), None)
    if oldest_counted is not None:
        raise QuotaExceeded(what, max(1, math.ceil((oldest_counted + window - now).total_seconds())))
