"""What a sent request gets while its routed approval waits: an edit each time someone votes (every
copy counts the votes, "1 of 2 approvals: dana", and keeps its buttons for the others), and one
"still waiting" reply when the route's reminder is due. Both are stored before they are sent
(`ApprovalMessage.votes_seen`, Reminder), so the sweep finds what a lost task left and a restart
sends no reminder twice."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F
from django.utils import timezone

from approvals import votes
from approvals.models import Approval

from . import bot, texts
from .models import ApprovalMessage, Reminder, SentVersion
from .requests import VOTES, Sent, close, max_attempts, recipients

logger = logging.getLogger(__name__)
Pending = Approval.Status.PENDING


def to_show_votes(approval: Approval) -> list[int]:
    """The sent messages of `approval` to edit now that someone voted."""
    if not bot.enabled():
        return []
    return list(ApprovalMessage.objects.filter(approval=approval.pk, status=ApprovalMessage.Status.SENT).values_list("pk", flat=True))


def show_votes(message_id: int) -> bool:
    """Edit a sent request of a waiting approval to count the votes cast since it was written; its
    buttons stay, for those who have not voted. True once nothing more is needed."""
    row = ApprovalMessage.objects.select_related("approval__tool_call", "approval__conversation__agent").prefetch_related(
        *VOTES
    ).filter(pk=message_id, status=ApprovalMessage.Status.SENT, message_id__isnull=False).first()
    if row is None or row.approval.status != Pending:
        return True  # never sent, or decided: closing edits it to the outcome
    approval = row.approval
    seen = len(approval.votes.all())
    if seen <= row.votes_seen:
        return True
    # The buttons decide what the text shows: the version of this send, or a new one if it was edited.
    version = row.versions.filter(shown_hash=approval.shown_hash).order_by("-pk").first()
    version = version or SentVersion.objects.create(message=row, shown_hash=approval.shown_hash)
    shown = texts.request(approval)
    try:
        bot.edit(row.chat_id, row.message_id, shown.text, texts.buttons(approval, version.token, is_whole=shown.is_whole))
    except bot.BadRequest as exc:  # the message is gone from the chat: nothing to edit, ever
        logger.warning("telegram: showing the votes of approval %s to %s failed: %s", approval.pk, row.chat_id, exc)
    except bot.TelegramError as exc:
        logger.warning("telegram: showing the votes of approval %s to %s failed: %s", approval.pk, row.chat_id, exc)
        ApprovalMessage.objects.filter(pk=row.pk).update(last_error=str(exc)[:500], updated_at=timezone.now())
        return False
    ApprovalMessage.objects.filter(pk=row.pk, votes_seen__lt=seen).update(votes_seen=seen, updated_at=timezone.now())
    if Approval.objects.filter(pk=approval.pk, status=Pending).exists():
        return True
    # Decided while this edit was on its way, and maybe closed before it put the buttons back: the
    # outcome has the last word.
    ApprovalMessage.objects.filter(pk=row.pk, status=ApprovalMessage.Status.CLOSED).update(status=ApprovalMessage.Status.SENT)
    return close(row.pk)


def queue_reminders(approval: Approval) -> list[int]:
    """A reminder for each person whose request was sent and who has not approved it yet; the ids
    to send. Once each: one Reminder per message."""
    if not bot.enabled() or approval.status != Pending:
        return []
    counted = votes.counted(approval)
    voted = {vote.user_id for vote in counted} | {vote.voter_id for vote in counted}
    accounts = [account.pk for account in recipients(approval) if account.user_id not in voted]
    sent = ApprovalMessage.objects.filter(approval=approval, account__in=accounts, status=ApprovalMessage.Status.SENT)
    rows = [Reminder.objects.get_or_create(message=message) for message in sent]
    return [reminder.pk for reminder, created in rows if created]


def remind(reminder_id: int) -> str:
    """Send one queued reminder, as a reply to its request, if its approval still waits."""
    claimed = Reminder.objects.filter(pk=reminder_id, status=Reminder.Status.QUEUED, attempts__lt=max_attempts())
    reminder = claimed.select_related(
        "message__approval__tool_call", "message__approval__conversation__agent"
    ).prefetch_related(*(f"message__{name}" for name in VOTES)).first()
    if reminder is None or not claimed.filter(attempts=reminder.attempts).update(attempts=reminder.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    row, approval = reminder.message, reminder.message.approval
    if approval.status != Pending:
        Reminder.objects.filter(pk=reminder.pk, status=Reminder.Status.QUEUED).update(status=Reminder.Status.CLOSED)
        return Sent.CLOSED
    try:
        bot.send(row.chat_id, texts.reminder(approval), reply_to=row.message_id)
    except bot.Forbidden as exc:
        Reminder.objects.filter(pk=reminder.pk, status=Reminder.Status.QUEUED).update(status=Reminder.Status.FAILED, last_error=str(exc)[:500])
        return Sent.FAILED
    except bot.TelegramError as exc:
        logger.warning("telegram: reminding %s of approval %s failed: %s", row.chat_id, approval.pk, exc)
        failed = {"status": Reminder.Status.FAILED} if reminder.attempts + 1 >= max_attempts() else {}
        Reminder.objects.filter(pk=reminder.pk, status=Reminder.Status.QUEUED).update(
            last_error=f"{exc.__class__.__name__}: {exc}"[:500], updated_at=timezone.now(), **failed
        )
        return Sent.FAILED
    Reminder.objects.filter(pk=reminder.pk).update(status=Reminder.Status.SENT, last_error="", updated_at=timezone.now())
    return Sent.SENT


def lost(*, now=None, limit: int = 200) -> tuple[list[int], list[int]]:
    """(reminders to send again, messages to edit again for votes they do not count yet): untouched
    for HITL_TELEGRAM_STALE_SECONDS while their task should have moved them."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HITL_TELEGRAM_STALE_SECONDS)
    reminders = Reminder.objects.filter(
        updated_at__lt=stale, status=Reminder.Status.QUEUED, attempts__lt=max_attempts(), message__approval__status=Pending
    )
    behind = ApprovalMessage.objects.filter(
        updated_at__lt=stale, status=ApprovalMessage.Status.SENT, message_id__isnull=False,
        approval__status=Pending, approval__quorum__gt=1,
    ).annotate(votes=Count("approval__votes")).filter(votes__gt=F("votes_seen"))
    resend = list(reminders.values_list("pk", flat=True)[:limit])
    reshow = list(behind.values_list("pk", flat=True)[:limit])
    # Stamped, so the next sweep leaves them to the tasks enqueued now.
    Reminder.objects.filter(pk__in=resend).update(updated_at=now)
    ApprovalMessage.objects.filter(pk__in=reshow).update(updated_at=now)
    return resend, reshow
