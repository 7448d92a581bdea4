"""Who gets a mail, and the life of each: queued, then sent (claimed by a conditional update, so a
retry and the sweep never both send) or closed unsent once decided. A mail server that is down
costs a retry, never a decision: nothing here runs inside one."""
import logging
import smtplib
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import Exists, OuterRef
from django.template.loader import render_to_string
from django.utils import timezone

from approvals import routing, tokens, votes
from approvals.models import Approval

from . import texts
from .models import EmailDelivery, EmailPreference

logger = logging.getLogger(__name__)
Status = EmailDelivery.Status
Kind = EmailDelivery.Kind


class Sent:
    SENT, NOT_CLAIMED, CLOSED, FAILED = "sent", "not claimed", "closed", "failed"


def enabled() -> bool:
    return settings.HITL_EMAIL_APPROVALS


def opted_in(user) -> bool:
    return bool(user.email) and not EmailPreference.objects.filter(user=user, opted_out=True).exists()


def recipients(approval: Approval) -> list:
    """Those who may decide it (approvals.routing.deciders) with an address, who did not opt out."""
    opted_out = set(EmailPreference.objects.filter(opted_out=True).values_list("user_id", flat=True))
    return [user for user in routing.deciders(approval) if user.is_active and user.email and user.pk not in opted_out]


def queue(approval: Approval) -> list[int]:
    """A queued mail for each recipient of a pending approval not mailed yet; the ids to send."""
    if not enabled() or approval.status != Approval.Status.PENDING:
        return []
    rows = [EmailDelivery.objects.get_or_create(approval=approval, user=user, kind=Kind.REQUEST) for user in recipients(approval)]
    return [row.pk for row, created in rows if created]


def voted(approval: Approval, user) -> bool:
    return any(user.pk in (vote.user_id, vote.voter_id) for vote in votes.counted(approval))


def queue_reminders(approval: Approval) -> list[int]:
    """When a route's reminder is due: one reminder to each person mailed the request who has not
    voted yet (once: one reminder row per person); the ids to send."""
    if not enabled() or approval.status != Approval.Status.PENDING:
        return []
    counted = votes.counted(approval)
    have_voted = {vote.user_id for vote in counted} | {vote.voter_id for vote in counted}
    mailed = EmailDelivery.objects.filter(approval=approval, kind=Kind.REQUEST, status=Status.SENT).exclude(user_id__in=have_voted)
    rows = [EmailDelivery.objects.get_or_create(approval=approval, user_id=user_id, kind=Kind.REMINDER)
            for user_id in mailed.values_list("user_id", flat=True)]
    return [row.pk for row, created in rows if created]


def queue_warnings(approval: Approval) -> list[int]:
    """When its deadline is near (approvals_expiring): one warning to each person mailed its request
    who has not voted yet (once: one warning row per person, so a second signal or a restart sends
    nothing twice); the ids to send."""
    if not enabled() or approval.status != Approval.Status.PENDING or approval.expires_at is None:
        return []
    mailed = EmailDelivery.objects.filter(approval=approval, approval__status=Approval.Status.PENDING, kind=Kind.REQUEST, status=Status.SENT)
    rows = [EmailDelivery.objects.get_or_create(approval=approval, user_id=user_id, kind=Kind.WARNING)
            for user_id in mailed.values_list("user_id", flat=True)]
    return [row.pk for row, created in rows if created]


def queue_late_warnings(delivery_id: int) -> list[int]:
    """The warning for a request mailed after its approval was warned (its send was retried, or the
    wait is so short that it is warned at once): it missed approvals_expiring, not the warning."""
    row = EmailDelivery.objects.select_related("approval").filter(pk=delivery_id, kind=Kind.REQUEST).first()
    if row is None or row.approval.warned_at is None:
        return []
    return queue_warnings(row.approval)


def queue_missed_warnings(*, now=None, limit: int = 200) -> list[int]:
    """Warnings approvals_expiring never queued: the worker that marked the approval warned died
    before its signal, or had email switched off. For each warned, still pending approval with a
    request mailed to someone who has no warning row (warned HITL_EMAIL_STALE_SECONDS ago, so the
    signal had its chance); the ids to send. One query when nothing was missed."""
    if not enabled():
        return []
    now = now or timezone.now()
    warned = EmailDelivery.objects.filter(approval=OuterRef("approval"), user=OuterRef("user"), kind=Kind.WARNING)
    unwarned = EmailDelivery.objects.filter(approval=OuterRef("pk"), kind=Kind.REQUEST, status=Status.SENT).exclude(Exists(warned))
    missed = Approval.objects.filter(
        Exists(unwarned), status=Approval.Status.PENDING,
        warned_at__lt=now - timedelta(seconds=settings.HITL_EMAIL_STALE_SECONDS), expires_at__gt=now,
    )
    return [delivery_id for approval in missed[:limit] for delivery_id in queue_warnings(approval)]


def requeue_edited(approval: Approval) -> list[int]:
    """After an edit: whoever was mailed the old version gets the new one (the old link decides nothing)."""
    if not enabled() or approval.status != Approval.Status.PENDING:
        return []
    deciders = [user.pk for user in recipients(approval)]
    shown = EmailDelivery.objects.filter(approval=approval, kind=Kind.REQUEST, user_id__in=deciders, status__in=[Status.SENT, Status.QUEUED])
    shown = shown.exclude(shown_hash=approval.shown_hash)
    # attempts=0 also voids a send in flight: its final conditional update finds nothing to mark.
    again = list(shown.values_list("pk", flat=True))
    EmailDelivery.objects.filter(pk__in=again).update(status=Status.QUEUED, attempts=0, last_error="", updated_at=timezone.now())
    return again + queue(approval)


def send(delivery_id: int) -> str:
    """Send one queued mail, if it is still to be sent and its approval still waits."""
    claimed = EmailDelivery.objects.filter(pk=delivery_id, status=Status.QUEUED, attempts__lt=max_attempts())
    row = claimed.select_related("user", "approval__tool_call", "approval__conversation__agent", "approval__requested_by").first()
    if row is None or not claimed.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    mine = EmailDelivery.objects.filter(pk=row.pk, status=Status.QUEUED, attempts=row.attempts + 1)
    approval, user = row.approval, row.user
    follow_up = row.kind in (Kind.REMINDER, Kind.WARNING)
    if approval.status != Approval.Status.PENDING or not opted_in(user) or not user.is_active or (follow_up and voted(approval, user)):
        mine.update(status=Status.CLOSED)
        return Sent.CLOSED
    try:
        compose(approval, user, kind=row.kind).send()
    except (smtplib.SMTPException, OSError) as exc:
        return _failed(row, mine, exc)
    mine.update(status=Status.SENT, address=user.email, shown_hash=approval.shown_hash, last_error="", updated_at=timezone.now())
    return Sent.SENT


def compose(approval: Approval, user, *, kind: str = Kind.REQUEST) -> EmailMultiAlternatives:
    """The mail of `kind`, a text part and an HTML part from the call's one summary: a request (or
    its reminder) with Approve and Reject links when the page can decide its kind, else the sentence
    and a link to the conversation; a warning with the deadline and a link to the site (Extend is there)."""
    context = texts.shown(approval) | {"user": user, "kind": kind, "reminder": kind == Kind.REMINDER}
    if kind == Kind.WARNING:
        subject, template = texts.warning_subject(context["summary"]), "emaillink/warning"
    else:
        subject, template = texts.subject(context["summary"], reminder=kind == Kind.REMINDER), "emaillink/mail"
        if context["decided_on_the_page"]:
            context |= decision_links(approval, user)
    mail = EmailMultiAlternatives(
        subject=subject,
        body=render_to_string(f"{template}.txt", context),
        to=[user.email],
        headers={"X-Hitl-Approval": str(approval.pk)},  # for a mail client's filters (and the tests)
        connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
    )
    mail.attach_alternative(render_to_string(f"{template}.html", context), "text/html")
    return mail


def decision_links(approval: Approval, user) -> dict:
    """Approve and Reject as two links, each with a single-use token of its own.

    The Approve token is issued complete (may approve) whatever the mail could show: it opens the
    page, which shows the whole call, and decides only the version it was issued for, so what is
    approved is what that page showed. The Reject token is issued not complete: it opens the reject
    form, and the decision service refuses an approve through it (services.ShownCut, the token left
    unspent), so a forged POST of "approve" with a Reject link's token approves nothing."""
    return {
        "approve_link": texts.link(tokens.issue(approval, user, channel="email", complete=True)),
        "reject_link": texts.reject_link(tokens.issue(approval, user, channel="email", complete=False)),
    }


def retry_failed(delivery_ids: list[int]) -> list[int]:
    """An operator's "send again" (the mail server fixed): failed mails of calls still waiting, queued afresh."""
    failed = EmailDelivery.objects.filter(pk__in=delivery_ids, status=Status.FAILED, approval__status=Approval.Status.PENDING)
    again = list(failed.values_list("pk", flat=True))
    EmailDelivery.objects.filter(pk__in=again).update(status=Status.QUEUED, attempts=0, last_error="", updated_at=timezone.now())
    return again


def close_unsent(approval_ids: list[int]) -> int:
    """Once decided, a mail still queued is never sent (a sent one's link says who decided)."""
    return EmailDelivery.objects.filter(approval_id__in=approval_ids, status=Status.QUEUED).update(
        status=Status.CLOSED, updated_at=timezone.now()
    )


def lost(*, now=None, limit: int = 200) -> list[int]:
    """Mails to send again: queued and untouched for HITL_EMAIL_STALE_SECONDS while their task
    should have moved them (a Redis restart, a killed worker, a mail server down)."""
    now = now or timezone.now()
    old = EmailDelivery.objects.filter(updated_at__lt=now - timedelta(seconds=settings.HITL_EMAIL_STALE_SECONDS))
    stale = old.filter(status=Status.QUEUED, attempts__lt=max_attempts())
    close_unsent(list(stale.exclude(approval__status=Approval.Status.PENDING).values_list("approval_id", flat=True)[:limit]))
    resend = list(stale.filter(approval__status=Approval.Status.PENDING).values_list("pk", flat=True)[:limit])
    EmailDelivery.objects.filter(pk__in=resend).update(updated_at=now)  # the next sweep leaves them to these tasks
    return resend


def max_attempts() -> int:
    return settings.HITL_EMAIL_RETRIES + 1


def still_queued(delivery_id: int) -> bool:
    """Whether a failed send is worth retrying (a permanent failure is not)."""
    return EmailDelivery.objects.filter(pk=delivery_id, status=Status.QUEUED).exists()


def _failed(row: EmailDelivery, mine, exc: Exception) -> str:
    logger.warning("email: sending approval %s to %s failed: %s", row.approval_id, row.user, exc)
    error = f"{type(exc).__name__}: {exc}"[:500]
    if _permanent(exc) or row.attempts + 1 >= max_attempts():
        mine.update(status=Status.FAILED, last_error=error)
    else:
        mine.update(last_error=error, updated_at=timezone.now())
    return Sent.FAILED


def _permanent(exc: Exception) -> bool:
    """A 5xx answer (no such mailbox, refused) will not change on a retry; a 4xx or a dead connection may."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(code >= 500 for code, _ in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPResponseException) and exc.smtp_code >= 500
