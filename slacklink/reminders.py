"""Replies in a sent request's thread: the one reminder each person who was sent a routed request
and has not voted gets when its route's reminder is due, and the warning (with an Extend button)
every sent copy gets when its deadline is near. Stored before they are sent (Reminder), so the
sweep sends one a lost task left, and none twice."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from approvals import votes
from approvals.models import Approval

from . import blocks, client
from .models import Reminder, SlackMessage
from .requests import RELATED, VOTES, Sent, max_attempts

logger = logging.getLogger(__name__)
Pending = Approval.Status.PENDING


def queue(approval: Approval) -> list[int]:
    """A reminder for each sent copy whose reader has not voted yet; the ids to send. Once each."""
    if not client.enabled() or approval.status != Pending:
        return []
    counted = votes.counted(approval)
    voted = {vote.user_id for vote in counted} | {vote.voter_id for vote in counted}
    sent = SlackMessage.objects.filter(approval=approval, status=SlackMessage.Status.SENT).exclude(account__user_id__in=voted)
    rows = [Reminder.objects.get_or_create(message=message, kind=Reminder.Kind.STILL_WAITING) for message in sent]
    return [reminder.pk for reminder, created in rows if created]


def queue_warnings(approval: Approval) -> list[int]:
    """A warning for each sent copy of a pending approval whose deadline is near; the ids to send.
    Once per deadline: an extended approval is warned again of its new one."""
    if not client.enabled() or approval.status != Pending or approval.expires_at is None:
        return []
    sent = SlackMessage.objects.filter(approval=approval, status=SlackMessage.Status.SENT)
    rows = [Reminder.objects.get_or_create(message=message, kind=Reminder.Kind.EXPIRING, deadline=approval.expires_at) for message in sent]
    return [warning.pk for warning, created in rows if created]


def queue_late_warnings(message_id: int) -> list[int]:
    """The warning for a copy sent after its approval was warned (its send was retried, or the wait
    is so short that it is warned at once): it missed approvals_expiring, not the warning."""
    row = SlackMessage.objects.select_related("approval").filter(pk=message_id).first()
    if row is None or row.approval.warned_at is None:
        return []
    return queue_warnings(row.approval)


def queue_missed_warnings(*, now=None, limit: int = 200) -> list[int]:
    """Warnings approvals_expiring never queued: the worker that marked the approval warned died
    before its signal, or had no Slack set up. For each sent copy of a warned, still pending
    approval without a warning of its deadline (warned HITL_SLACK_STALE_SECONDS ago, so the signal
    had its chance); the ids to send."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HITL_SLACK_STALE_SECONDS)
    warned = Reminder.objects.filter(message=OuterRef("pk"), kind=Reminder.Kind.EXPIRING, deadline=OuterRef("approval__expires_at"))
    approvals = set(SlackMessage.objects.filter(
        status=SlackMessage.Status.SENT, approval__status=Pending, approval__warned_at__lt=stale, approval__expires_at__gt=now,
    ).exclude(Exists(warned)).values_list("approval", flat=True)[:limit])
    return [warning for approval in Approval.objects.filter(pk__in=approvals) for warning in queue_warnings(approval)]


def send(reminder_id: int) -> str:
    """Send one queued reminder, in its request's thread, if the approval still waits."""
    claimed = Reminder.objects.filter(pk=reminder_id, status=Reminder.Status.QUEUED, attempts__lt=max_attempts())
    reminder = claimed.select_related(*(f"message__{name}" for name in RELATED)).prefetch_related(
        *(f"message__{name}" for name in VOTES)
    ).first()
    if reminder is None or not claimed.filter(attempts=reminder.attempts).update(attempts=reminder.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    row, approval = reminder.message, reminder.message.approval
    # A warning of a deadline since extended says nothing true: the new deadline gets its own.
    if approval.status != Pending or (reminder.kind == Reminder.Kind.EXPIRING and reminder.deadline != approval.expires_at):
        Reminder.objects.filter(pk=reminder.pk, status=Reminder.Status.QUEUED).update(status=Reminder.Status.CLOSED)
        return Sent.CLOSED
    try:
        if reminder.kind == Reminder.Kind.EXPIRING:
            client.reply(row.channel, row.ts, *blocks.warning(approval, row.versions.order_by("-pk").first().token))
        else:
            client.reply(row.channel, row.ts, blocks.reminder(approval))
    except client.ERRORS as exc:
        error = client.error_code(exc)[:500]
        logger.warning("slack: reminding %s of approval %s failed: %s", row.account.slack_user_id, approval.pk, error)
        failed = {"status": Reminder.Status.FAILED} if client.is_permanent(exc) or reminder.attempts + 1 >= max_attempts() else {}
        Reminder.objects.filter(pk=reminder.pk, status=Reminder.Status.QUEUED).update(last_error=error, updated_at=timezone.now(), **failed)
        return Sent.FAILED
    Reminder.objects.filter(pk=reminder.pk).update(status=Reminder.Status.SENT, last_error="", updated_at=timezone.now())
    return Sent.SENT


def lost(*, now=None, limit: int = 200) -> list[int]:
    """Reminders a lost task left queued (untouched for HITL_SLACK_STALE_SECONDS) of waiting approvals."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HITL_SLACK_STALE_SECONDS)
    ids = list(Reminder.objects.filter(
        updated_at__lt=stale, status=Reminder.Status.QUEUED, attempts__lt=max_attempts(), message__approval__status=Pending
    ).values_list("pk", flat=True)[:limit])
    Reminder.objects.filter(pk__in=ids).update(updated_at=now)
    return ids
