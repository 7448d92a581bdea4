"""Per-user quotas on what costs money or fills the database: conversations started, messages
posted, model calls. Counted from the stored rows over a sliding window, so every process agrees
and nothing needs a cache; a limit of 0 turns a quota off. Checked inside the transaction that
stores what is counted, under a lock on the user's row, so that concurrent requests are counted
one after another (counted before the transaction, sixty at once past a limit of twenty all got in)."""
import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from .models import Conversation, Message


class QuotaExceeded(Exception):
    """Too many in the window; `retry_after` is how many seconds until one more is allowed."""

    def __init__(self, what: str, retry_after: int):
        self.retry_after = retry_after
        super().__init__(f"You have reached the limit of {what}. Try again in {retry_after} s.")


def check_conversation(user) -> None:
    """Before a new conversation (whose first message is checked as any other), in its transaction."""
    limit = settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR
    _check(user, Conversation.objects.filter(owner=user), limit, timedelta(hours=1), f"{limit} conversations an hour")


def check_message(user) -> None:
    """Before a message that may start the model (and before a retry, which calls it), in the
    transaction that stores it, after the conversation's lock (the order every writer takes)."""
    limit = settings.HITL_QUOTA_MESSAGES_PER_MINUTE
    _check(user, Message.objects.filter(author=user), limit, timedelta(minutes=1), f"{limit} messages a minute")
    limit = settings.HITL_QUOTA_MODEL_CALLS_PER_HOUR
    # Each assistant message is one model call.
    calls = Message.objects.filter(conversation__owner=user, role=Message.Role.ASSISTANT)
    _check(user, calls, limit, timedelta(hours=1), f"{limit} model calls an hour")


def _check(user, rows, limit: int, window: timedelta, what: str) -> None:
    if not limit:
        return
    _lock(user)
    now = timezone.now()
    recent = rows.filter(created_at__gt=now - window).order_by("-created_at").values_list("created_at", flat=True)
    # The limit-th newest event in the window: once it leaves the window, one more is allowed.
    oldest_counted = next(iter(recent[limit - 1 : limit]), None)
    if oldest_counted is not None:
        raise QuotaExceeded(what, max(1, math.ceil((oldest_counted + window - now).total_seconds())))


def _lock(user) -> None:
    """Hold the user's row until the transaction that stores the counted row commits: a second
    request of the same user counts only after the first one's row is there. PostgreSQL locks the
    row; SQLite's transactions are IMMEDIATE (hitl.settings), so the first write lock already orders
    them. Outside a transaction the lock would end at once, which is the race itself: refused."""
    if transaction.get_autocommit():
        raise TransactionManagementError("A quota is checked inside the transaction that stores what it counts.")
    get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk").first()
