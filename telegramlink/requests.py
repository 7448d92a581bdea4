"""Which people get a request on Telegram, and the life of each message: queued, sent (claimed
by a conditional update, so a retry and the sweep never both send), then edited to the outcome."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from approvals import routing
from approvals.models import Approval

from . import bot, texts
from .models import ApprovalMessage, SentVersion, TelegramAccount

logger = logging.getLogger(__name__)
Status = ApprovalMessage.Status


# A message's text counts its approval's votes (approvals.votes.summary) and names its route's
# groups: read with it, a query each.
VOTES = ("approval__votes__user", "approval__votes__on_behalf_of", "approval__route__approvers", "approval__route__escalate_to")
# What approvals.summary and the text read of a message's approval, in the same query.
SHOWN = ("approval__tool_call", "approval__conversation__agent", "approval__requested_by", "approval__extended_by")


class Sent:
    SENT, NOT_CLAIMED, CLOSED, FAILED = "sent", "not claimed", "closed", "failed"


def recipients(approval: Approval) -> list[TelegramAccount]:
    """The linked accounts of those who may decide it (approvals.routing.deciders)."""
    accounts = TelegramAccount.objects.select_related("user").filter(user__is_active=True)
    return list(accounts.filter(user_id__in=[user.pk for user in routing.deciders(approval)]).order_by("user_id"))


def queue(approval: Approval) -> list[int]:
    """A queued message for each recipient of a pending approval; the ids to send."""
    if not bot.enabled() or approval.status != Approval.Status.PENDING:
        return []
    rows = [
        ApprovalMessage.objects.get_or_create(approval=approval, account=account, defaults={"chat_id": account.chat_id})
        for account in recipients(approval)
    ]
    return [row.pk for row, created in rows if created]


def send(message_id: int) -> str:
    """Send one queued message, if it is still to be sent and its approval still waits."""
    claimed = ApprovalMessage.objects.filter(pk=message_id, status=Status.QUEUED, attempts__lt=max_attempts())
    row = claimed.select_related(*SHOWN).prefetch_related(*VOTES).first()
    if row is None or not claimed.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    approval = row.approval
    if approval.status != Approval.Status.PENDING:
        ApprovalMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.CLOSED)
        return Sent.CLOSED
    # Each send is a version of its own: a copy Telegram delivered though the send failed here (a
    # timeout) keeps deciding only what it showed, whatever a later send of an edit shows.
    shown = texts.request(approval)
    version = SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=shown.complete)
    try:
        sent_id = bot.send(row.chat_id, shown.text, texts.buttons(approval, version.token, complete=shown.complete))
    except bot.Forbidden as exc:  # blocked, or the chat is gone: retrying will not help
        ApprovalMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.FAILED, last_error=str(exc)[:500])
        return Sent.FAILED
    except bot.TelegramError as exc:
        ApprovalMessage.objects.filter(pk=row.pk).update(last_error=f"{exc.__class__.__name__}: {exc}"[:500], updated_at=timezone.now())
        logger.warning("telegram: sending approval %s to %s failed: %s", approval.pk, row.chat_id, exc)
        if row.attempts + 1 >= max_attempts():
            ApprovalMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.FAILED)
        return Sent.FAILED
    ApprovalMessage.objects.filter(pk=row.pk).update(
        status=Status.SENT, message_id=sent_id, last_error="", votes_seen=len(approval.votes.all()), updated_at=timezone.now()
    )
    return Sent.SENT


def close(message_id: int) -> bool:
    """Edit a sent message to its approval's outcome (its buttons go); a message never sent is
    closed unsent. True once the message needs nothing more."""
    row = ApprovalMessage.objects.select_related(*SHOWN, "approval__decided_by").prefetch_related(*VOTES).filter(pk=message_id).first()
    if row is None or row.status in (Status.CLOSED, Status.FAILED):
        return True
    approval = row.approval
    if approval.status == Approval.Status.PENDING:
        return True  # still waiting (an edit of its arguments): its buttons keep working
    if row.status == Status.QUEUED:
        if ApprovalMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.CLOSED):
            return True
        row.refresh_from_db()  # sent meanwhile: edit it
    try:
        bot.edit(row.chat_id, row.message_id, texts.outcome_text(approval))
    except bot.TelegramError as exc:
        logger.warning("telegram: editing the message of approval %s failed: %s", approval.pk, exc)
        ApprovalMessage.objects.filter(pk=row.pk).update(last_error=str(exc)[:500], updated_at=timezone.now())
        return False
    ApprovalMessage.objects.filter(pk=row.pk, status=Status.SENT).update(status=Status.CLOSED, updated_at=timezone.now())
    return True


def lost(*, now=None, limit: int = 200) -> tuple[list[int], list[int]]:
    """(messages to send again, messages to close again): untouched for HITL_TELEGRAM_STALE_SECONDS
    while their task should have moved them (a Redis restart, a killed worker)."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HITL_TELEGRAM_STALE_SECONDS)
    old = ApprovalMessage.objects.filter(updated_at__lt=stale)
    to_send = old.filter(status=Status.QUEUED, attempts__lt=max_attempts(), approval__status=Approval.Status.PENDING)
    to_close = old.filter(Q(status=Status.SENT) | Q(status=Status.QUEUED)).exclude(approval__status=Approval.Status.PENDING)
    resend = list(to_send.values_list("pk", flat=True)[:limit])
    reclose = list(to_close.values_list("pk", flat=True)[:limit])
    # Stamp them, so the next sweep leaves them to the tasks enqueued now.
    ApprovalMessage.objects.filter(pk__in=resend + reclose).update(updated_at=now)
    return resend, reclose


def max_attempts() -> int:
    return settings.HITL_TELEGRAM_RETRIES + 1
