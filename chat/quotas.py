"""Per-user quotas on what costs money or fills the database: conversations started, messages
posted, model calls. Counted from the stored rows over a sliding window, so every process agrees
and nothing needs a cache; a limit of 0 turns a quota off. Checked inside the transaction that
stores what is counted, under a lock on the user's row, so that concurrent requests are counted
one after another (counted before the transaction, sixty at once past a limit of twenty all got in)."""
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import QuerySet, Subquery
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from .models import Conversation, ConversationSource, Message

CHAT = ConversationSource.CHAT


class QuotaExceeded(Exception):
    """Too many in the window; `retry_after` is how many seconds until one more is allowed."""

    def __init__(self, what: str, retry_after: int):
        self.what, self.retry_after = what, retry_after
        super().__init__(f"You have reached the limit of {what}. Try again in {retry_after} s.")


def check_conversation(user) -> None:
    """Before a new conversation and its first message, in the transaction that stores them: the
    conversations an hour, then the message quotas (as check_message)."""
    _check(user, [_conversations(user), *_messages(user)])


def check_message(user) -> None:
    """Before a message that may start the model (and before a retry, which calls it), in the
    transaction that stores it, after the conversation's lock (the order every writer takes)."""
    _check(user, _messages(user))


def check_outside_request(user) -> None:
    """Before an outside approval request or a gateway call is stored (and before the conversation
    one makes): a quota of their own, so that an agent asking never uses up its owner's chat, whose
    quotas count chat conversations, messages and model calls only."""
    limit = settings.HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR
    outside = Message.objects.filter(conversation__owner=user, role=Message.Role.ASSISTANT).exclude(conversation__source=CHAT)
    _check(user, [_Quota(limit, timedelta(hours=1), f"{limit} approval requests and gateway calls an hour", lambda: outside)])


@dataclass(frozen=True)
class _Quota:
    limit: int  # 0: off
    window: timedelta
    what: str
    rows: Callable[[], QuerySet]  # one row per counted event, with its `created_at` (built only if on)


def _conversations(user) -> _Quota:
    limit = settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR
    return _Quota(
        limit, timedelta(hours=1), f"{limit} conversations an hour", lambda: Conversation.objects.filter(owner=user, source=CHAT)
    )


def _messages(user) -> list[_Quota]:
    per_minute, calls = settings.HITL_QUOTA_MESSAGES_PER_MINUTE, settings.HITL_QUOTA_MODEL_CALLS_PER_HOUR
    return [
        _Quota(
            per_minute, timedelta(minutes=1), f"{per_minute} messages a minute",
            lambda: Message.objects.filter(author=user, conversation__source=CHAT),
        ),
        # Each assistant message of a chat is one model call (an outside conversation's are requests).
        _Quota(
            calls, timedelta(hours=1), f"{calls} model calls an hour",
            lambda: Message.objects.filter(conversation__owner=user, conversation__source=CHAT, role=Message.Role.ASSISTANT),
        ),
    ]


def _check(user, quotas: list[_Quota]) -> None:
    """Every quota that is on, in one query (after the lock): the limit-th newest event in each
    window; once it leaves the window, one more is allowed. The first one reached is raised."""
    quotas = [quota for quota in quotas if quota.limit]
    if not quotas:
        return
    _lock(user)
    now = timezone.now()
    oldest_counted = {
        f"q{n}": Subquery(
            quota.rows().filter(created_at__gt=now - quota.window)
            .order_by("-created_at")
            .values("created_at")[quota.limit - 1 : quota.limit]
        )
        for n, quota in enumerate(quotas)
    }
    found = get_user_model().objects.filter(pk=user.pk).values(**oldest_counted).first() or {}
    for n, quota in enumerate(quotas):
        if (oldest := found.get(f"q{n}")) is not None:
            raise QuotaExceeded(quota.what, max(1, math.ceil((oldest + quota.window - now).total_seconds())))


def _lock(user) -> None:
    """Hold the user's row until the transaction that stores the counted row commits: a second
    request of the same user counts only after the first one's row is there. PostgreSQL locks the
    row, in a statement of its own: the count after it must see what the request it waited for
    stored (in one statement, its snapshot would predate the wait). SQLite's transactions are
    IMMEDIATE (hitl.settings), so the first write lock already orders them: no statement. Outside a
    transaction the lock would end at once, which is the race itself: refused."""
    if transaction.get_autocommit():
        raise TransactionManagementError("A quota is checked inside the transaction that stores what it counts.")
    if connection.features.has_select_for_update:
        get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk").first()
