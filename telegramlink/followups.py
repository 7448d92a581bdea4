"""What a sent request gets while its approval waits: an edit each time someone votes (every copy
counts the votes, "1 of 2 approvals: dana", and keeps its buttons for the others) or its deadline
is extended; one "still waiting" reply when a route's reminder is due; and one "expires soon"
reply with an Extend button when its warning is due (approvals_expiring). Each is stored before it
is sent (`ApprovalMessage.votes_seen`, Reminder, ExpiryWarning), so the sweep finds what a lost
task left and a restart sends none twice."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F
from django.utils import timezone

from approvals import votes
from approvals.models import Approval

from . import bot, texts
from .models import ApprovalMessage, ExpiryWarning, Reminder, SentVersion
from .requests import SHOWN, VOTES, Sent, close, max_attempts, recipients

logger = logging.getLogger(__name__)
Pending = Approval.Status.PENDING


def to_rewrite(approval: Approval) -> list[int]:
    """The sent messages of `approval` to edit now that someone voted or extended it."""
    if not bot.enabled():
        return []
    return list(ApprovalMessage.objects.filter(approval=approval.pk, status=ApprovalMessage.Status.SENT).values_list("pk", flat=True))


def show_votes(message_id: int) -> bool:
    """Edit a sent request of a waiting approval to count the votes cast since it was written."""
    return rewrite(message_id, for_votes=True)


def rewrite(message_id: int, *, for_votes: bool = False) -> bool:
    """Edit a sent request of a waiting approval to what it shows now (the votes cast; `for_votes`
    False: whatever changed, a new deadline); its buttons stay, for those who have not decided.
    True once nothing more is needed."""
    row = ApprovalMessage.objects.select_related(*SHOWN).prefetch_related(*VOTES).filter(
        pk=message_id, status=ApprovalMessage.Status.SENT, message_id__isnull=False
    ).first()
    if row is None or row.approval.status != Pending:
        return True  # never sent, or decided: closing edits it to the outcome
    approval = row.approval
    seen = len(approval.votes.all())
    if for_votes and seen <= row.votes_seen:
        return True
    shown = texts.request(approval)
    # The buttons decide what the text shows: the version of this send, or a new one if it changed.
    version = row.versions.filter(shown_hash=approval.shown_hash, complete=shown.complete).order_by("-pk").first()
    version = version or SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=shown.complete)
    try:
        bot.edit(row.chat_id, row.message_id, shown.text, texts.buttons(approval, version.token, complete=shown.complete))
    except bot.BadRequest as exc:  # the message is gone from the chat: nothing to edit, ever
        logger.warning("telegram: editing the request of approval %s to %s failed: %s", approval.pk, row.chat_id, exc)
    except bot.TelegramError as exc:
        logger.warning("telegram: editing the request of approval %s to %s failed: %s", approval.pk, row.chat_id, exc)
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
    outcome, _ = _send_reply(Reminder, reminder_id, lambda reminder: (texts.reminder(reminder.message.approval), []))
    return outcome


def queue_warnings(approval: Approval) -> list[int]:
    """A warning for each sent request of a pending approval whose deadline nears; the ids to send.
    Once per message and deadline: an extended deadline is warned of again, a repeated signal not."""
    if not bot.enabled() or approval.status != Pending or approval.expires_at is None:
        return []
    sent = ApprovalMessage.objects.filter(approval=approval, status=ApprovalMessage.Status.SENT, message_id__isnull=False)
    rows = [ExpiryWarning.objects.get_or_create(message=message, expires_at=approval.expires_at) for message in sent]
    return [warning.pk for warning, created in rows if created]


def queue_warnings_sent_before(message_id: int) -> list[int]:
    """The warning for a request sent after its approval's warning went out (the sweep can run
    between the request and its send): the ids to send. Its approval's `warned_at` is read after
    the message is stored as sent, so either this or the sweep's receiver sees the other."""
    row = ApprovalMessage.objects.select_related("approval").filter(pk=message_id, status=ApprovalMessage.Status.SENT).first()
    if row is None or row.approval.warned_at is None:
        return []
    return queue_warnings(row.approval)


def warn(warning_id: int) -> str:
    """Send one queued warning, as a reply to its request with an Extend button, if its approval
    still waits for the deadline it warns of."""
    outcome, reply_id = _send_reply(ExpiryWarning, warning_id, _warning)
    if reply_id is not None:
        ExpiryWarning.objects.filter(pk=warning_id).update(reply_id=reply_id)
    return outcome


def _warning(warning: ExpiryWarning) -> tuple[str, list] | None:
    approval = warning.message.approval
    if approval.expires_at != warning.expires_at:
        return None  # extended since it was queued: the new deadline gets its own
    version = warning.message.versions.order_by("-pk").first()  # names the approval; Extend decides nothing
    return texts.warning(approval), texts.warning_buttons(approval, version.token) if version else []


def retire_warnings(message_id: int) -> None:
    """Edit the sent warnings of a request whose Extend button is spent (extended, or decided) to
    say so, without it. Best effort: a press on one left behind is answered, and changes nothing."""
    spent = ExpiryWarning.objects.select_related("message__approval__extended_by", "message__approval__decided_by").filter(
        message=message_id, status=ExpiryWarning.Status.SENT, reply_id__isnull=False
    )
    for warning in spent:
        approval = warning.message.approval
        if approval.status == Pending and approval.expires_at == warning.expires_at:
            continue  # still the deadline it warns of: its button works
        try:
            bot.edit(warning.message.chat_id, warning.reply_id, texts.warning_spent(approval))
        except bot.TelegramError as exc:
            logger.warning("telegram: retiring the warning of approval %s failed: %s", approval.pk, exc)
            continue
        ExpiryWarning.objects.filter(pk=warning.pk, status=ExpiryWarning.Status.SENT).update(status=ExpiryWarning.Status.CLOSED)


def _send_reply(model, row_id: int, render) -> tuple[str, int | None]:
    """Claim one queued reply to a request (a Reminder or an ExpiryWarning: the same outbox) by a
    conditional update and send it while its approval waits; `render(row)` gives (text, buttons),
    or None when it is no longer to be sent. (What happened, the sent message's id.)"""
    claimed = model.objects.filter(pk=row_id, status=model.Status.QUEUED, attempts__lt=max_attempts())
    row = claimed.select_related(*(f"message__{name}" for name in SHOWN)).prefetch_related(
        *(f"message__{name}" for name in VOTES)
    ).first()
    if row is None or not claimed.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED, None
    message, approval = row.message, row.message.approval
    shown = render(row) if approval.status == Pending else None
    if shown is None:
        model.objects.filter(pk=row.pk, status=model.Status.QUEUED).update(status=model.Status.CLOSED)
        return Sent.CLOSED, None
    try:
        sent_id = bot.send(message.chat_id, *shown, reply_to=message.message_id)
    except bot.Forbidden as exc:
        model.objects.filter(pk=row.pk, status=model.Status.QUEUED).update(status=model.Status.FAILED, last_error=str(exc)[:500])
        return Sent.FAILED, None
    except bot.TelegramError as exc:
        logger.warning("telegram: a %s to %s of approval %s failed: %s", model._meta.verbose_name, message.chat_id, approval.pk, exc)
        failed = {"status": model.Status.FAILED} if row.attempts + 1 >= max_attempts() else {}
        model.objects.filter(pk=row.pk, status=model.Status.QUEUED).update(
            last_error=f"{exc.__class__.__name__}: {exc}"[:500], updated_at=timezone.now(), **failed
        )
        return Sent.FAILED, None
    model.objects.filter(pk=row.pk).update(status=model.Status.SENT, last_error="", updated_at=timezone.now())
    return Sent.SENT, sent_id


def _unwarned(now, stale, limit: int) -> list[int]:
    """Warnings to queue for sent requests of approvals warned a while ago that have none for their
    deadline: approvals_expiring is sent after the sweep's commit, in its process, and is lost if
    that process dies first (or runs without the bot). The ids queued."""
    if not bot.enabled():
        return []
    missing = ApprovalMessage.objects.filter(
        status=ApprovalMessage.Status.SENT, message_id__isnull=False, approval__status=Pending,
        approval__warned_at__lt=stale, approval__expires_at__gt=now,
    ).exclude(warnings__expires_at=F("approval__expires_at")).select_related("approval")[:limit]
    rows = [ExpiryWarning.objects.get_or_create(message=row, expires_at=row.approval.expires_at) for row in missing]
    return [warning.pk for warning, created in rows if created]


def lost(*, now=None, limit: int = 200) -> tuple[list[int], list[int], list[int]]:
    """(reminders and warnings to send again, messages to edit again for votes they do not count
    yet): untouched for HITL_TELEGRAM_STALE_SECONDS while their task should have moved them."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.HITL_TELEGRAM_STALE_SECONDS)
    reminders, warnings = (
        model.objects.filter(updated_at__lt=stale, status=model.Status.QUEUED, attempts__lt=max_attempts(), message__approval__status=Pending)
        for model in (Reminder, ExpiryWarning)
    )
    behind = ApprovalMessage.objects.filter(
        updated_at__lt=stale, status=ApprovalMessage.Status.SENT, message_id__isnull=False,
        approval__status=Pending, approval__quorum__gt=1,
    ).annotate(votes=Count("approval__votes")).filter(votes__gt=F("votes_seen"))
    resend = list(reminders.values_list("pk", flat=True)[:limit])
    rewarn = list(warnings.values_list("pk", flat=True)[:limit]) + _unwarned(now, stale, limit)
    reshow = list(behind.values_list("pk", flat=True)[:limit])
    # Stamped, so the next sweep leaves them to the tasks enqueued now.
    Reminder.objects.filter(pk__in=resend).update(updated_at=now)
    ExpiryWarning.objects.filter(pk__in=rewarn).update(updated_at=now)
    ApprovalMessage.objects.filter(pk__in=reshow).update(updated_at=now)
    return resend, rewarn, reshow
