"""Whose devices get a request, and the life of each notification: queued, sent (claimed by a
conditional update, so a retry and the sweep never both send), then replaced by the outcome. A
device that got the request gets one warning as its deadline nears (a row of its own, so a restart
never warns twice), and the request again once the deadline is extended."""
import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from approvals import routing, tokens
from approvals.models import Approval
from approvals.summary import summarize

from . import pushservice, texts
from .models import PushNotification, PushSubscription

logger = logging.getLogger(__name__)
Status, Kind = PushNotification.Status, PushNotification.Kind
DEFAULT_TTL = 24 * 3600
EXTEND_SALT = "pushlink.extend"


class Sent:
    SENT, NOT_CLAIMED, CLOSED, FAILED = "sent", "not claimed", "closed", "failed"


def recipients(approval: Approval) -> list[PushSubscription]:
    """The devices of those who may decide it (approvals.routing.deciders)."""
    users = [user.pk for user in routing.deciders(approval)]
    return list(PushSubscription.objects.filter(user_id__in=users, user__is_active=True).order_by("user_id", "pk"))


def queue(approval: Approval) -> list[int]:
    """A queued notification for each device of each decider of a pending approval; the ids to send."""
    if not pushservice.enabled() or approval.status != Approval.Status.PENDING:
        return []
    rows = [
        PushNotification.objects.get_or_create(
            approval=approval, subscription=subscription, kind=Kind.REQUEST,
            defaults={"user_id": subscription.user_id, "device": subscription.device},
        )
        for subscription in recipients(approval)
    ]
    return [row.pk for row, created in rows if created]


def queue_warnings(approvals) -> list[int]:
    """A queued warning for each device that was sent the request of these pending approvals, once
    per approval and device (a second round for the same deadline finds the rows made)."""
    if not pushservice.enabled():
        return []
    made = []
    for approval in approvals:
        if approval.status != Approval.Status.PENDING:
            continue
        sent = PushNotification.objects.filter(approval=approval, kind=Kind.REQUEST, status=Status.SENT, subscription__isnull=False)
        for row in sent.select_related("subscription"):
            warning, created = PushNotification.objects.get_or_create(
                approval=approval, subscription=row.subscription, kind=Kind.WARNING, defaults={"user_id": row.user_id, "device": row.device}
            )
            if created:
                made.append(warning.pk)
    return made


def queue_late_warnings(notification_id: int) -> list[int]:
    """The warning for a request sent after its approval was warned (its send was retried, or the
    wait is so short that it is warned at once): it missed approvals_expiring, not the warning."""
    row = PushNotification.objects.select_related("approval").filter(pk=notification_id, kind=Kind.REQUEST).first()
    if row is None or row.approval.warned_at is None:
        return []
    return queue_warnings([row.approval])


def queue_missed_warnings(*, now=None, limit: int = 200) -> list[int]:
    """Warnings approvals_expiring never queued: the worker that marked the approval warned died
    before its signal, or had push switched off. For each warned, still pending approval with a
    request sent to a device that has no warning row (warned HITL_PUSH_STALE_SECONDS ago, so the
    signal had its chance); the ids to send. One query when nothing was missed."""
    if not pushservice.enabled():
        return []
    now = now or timezone.now()
    warned = PushNotification.objects.filter(approval=OuterRef("approval"), subscription=OuterRef("subscription"), kind=Kind.WARNING)
    unwarned = PushNotification.objects.filter(
        approval=OuterRef("pk"), kind=Kind.REQUEST, status=Status.SENT, subscription__isnull=False
    ).exclude(Exists(warned))
    missed = Approval.objects.filter(
        Exists(unwarned), status=Approval.Status.PENDING,
        warned_at__lt=now - timedelta(seconds=settings.HITL_PUSH_STALE_SECONDS), expires_at__gt=now,
    )
    return queue_warnings(missed[:limit])


def requeue_extended(approval: Approval) -> list[int]:
    """After an extend: the warnings of the old deadline are forgotten (the new one gets its own),
    and each device shown the request gets it again in place of the warning, with its actions."""
    if not pushservice.enabled() or approval.status != Approval.Status.PENDING:
        return []
    PushNotification.objects.filter(approval=approval, kind=Kind.WARNING).delete()
    shown = PushNotification.objects.filter(approval=approval, kind=Kind.REQUEST, status=Status.SENT)
    again = list(shown.values_list("pk", flat=True))
    PushNotification.objects.filter(pk__in=again).update(status=Status.QUEUED, attempts=0, last_error="", updated_at=timezone.now())
    return again


def requeue_edited(approval: Approval) -> list[int]:
    """After an edit: every device that was shown the old version gets the new one (its tokens
    decide only the version they were issued for), and new deciders get it too."""
    if not pushservice.enabled() or approval.status != Approval.Status.PENDING:
        return []
    deciders = [subscription.pk for subscription in recipients(approval)]
    shown = PushNotification.objects.filter(approval=approval, kind=Kind.REQUEST, subscription_id__in=deciders).exclude(status=Status.CLOSED)
    # attempts=0 also voids a send in flight: its final conditional update finds nothing to mark.
    again = list(shown.values_list("pk", flat=True))
    PushNotification.objects.filter(pk__in=again).update(status=Status.QUEUED, attempts=0, last_error="", updated_at=timezone.now())
    return again + queue(approval)


def send(notification_id: int) -> str:
    """Send one queued notification, if it is still to be sent and its approval still waits."""
    claimed = PushNotification.objects.filter(pk=notification_id, status=Status.QUEUED, attempts__lt=max_attempts())
    row = claimed.select_related(
        "subscription", "user", "approval__tool_call", "approval__conversation__agent", "approval__requested_by"
    ).first()
    if row is None or not claimed.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    mine = PushNotification.objects.filter(pk=row.pk, status=Status.QUEUED, attempts=row.attempts + 1)
    approval, subscription = row.approval, row.subscription
    if subscription is None:
        mine.update(status=Status.CLOSED, last_error="The device was removed.")
        return Sent.CLOSED
    if approval.status != Approval.Status.PENDING or (row.kind == Kind.WARNING and ttl(approval) == 0):
        mine.update(status=Status.CLOSED)
        return Sent.CLOSED
    summary = summarize(approval)
    whole = texts.shows_whole(summary)
    if row.kind == Kind.WARNING:
        payload = texts.warning(approval, summary, extend_token(row) if approval.extended_at is None else None)
    else:
        payload = texts.request(approval, summary, offered_tokens(approval, row.user, whole=whole))
    try:
        pushservice.push(subscription.subscription_info(), payload, ttl=ttl(approval), topic=texts.tag(approval))
    except pushservice.PushFailed as exc:
        return _failed(row, mine, exc)
    shown_whole = whole and row.kind == Kind.REQUEST
    mine.update(status=Status.SENT, shown_hash=approval.shown_hash, complete=shown_whole, last_error="", updated_at=timezone.now())
    return Sent.SENT


def offered_tokens(approval: Approval, user, *, whole: bool) -> dict[str, str] | None:
    """The actions' tokens: none for a call decided on the site only (texts.offers_actions); a
    reject token always (issued as cut: it can reject, never approve, whatever POSTs it); an approve
    token only when the notification shows the whole call."""
    if not texts.offers_actions(approval):
        return None
    offered = {"reject": tokens.issue(approval, user, channel="push", complete=False)}
    if whole:
        offered["approve"] = tokens.issue(approval, user, channel="push", complete=True)
    return offered


def extend_token(row: PushNotification) -> str:
    """The warning's Extend: names the approval and the warned device's owner, who extends it via push; signed."""
    return signing.dumps({"a": row.approval_id, "u": row.user_id}, salt=EXTEND_SALT, compress=False)


def open_extend_token(value: str) -> tuple[int, object] | None:
    """(approval id, user) an Extend token names, if this site signed it and that person is active."""
    try:
        data = signing.loads(value, salt=EXTEND_SALT, max_age=tokens.DEFAULT_LIFETIME)
        approval_id, user_id = int(data["a"]), int(data["u"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        return None
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    return (approval_id, user) if user is not None else None


def close(notification_id: int) -> bool:
    """Replace a sent notification by its approval's outcome; one never sent is closed unsent.
    True once it needs nothing more."""
    row = PushNotification.objects.select_related(
        "subscription", "approval__tool_call", "approval__decided_by"
    ).filter(pk=notification_id).first()
    if row is None or row.status in (Status.CLOSED, Status.FAILED):
        return True
    approval = row.approval
    if approval.status == Approval.Status.PENDING:
        return True
    if row.kind == Kind.WARNING:
        # The request's row pushes the outcome under the same tag: it replaces the warning too.
        PushNotification.objects.filter(pk=row.pk, status__in=(Status.QUEUED, Status.SENT)).update(status=Status.CLOSED)
        return True
    if row.status == Status.QUEUED:
        if PushNotification.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.CLOSED):
            return True
        row.refresh_from_db()  # sent meanwhile: replace it
    sent = PushNotification.objects.filter(pk=row.pk, status=Status.SENT)
    if row.subscription is None:
        sent.update(status=Status.CLOSED)
        return True
    try:
        pushservice.push(row.subscription.subscription_info(), texts.decided(approval), ttl=DEFAULT_TTL, topic=texts.tag(approval))
    except pushservice.PushFailed as exc:
        if exc.is_gone:
            _remove(row.subscription)
            sent.update(status=Status.CLOSED, last_error=str(exc))
            return True
        logger.warning("push: replacing the notification of approval %s failed: %s", approval.pk, exc)
        PushNotification.objects.filter(pk=row.pk).update(last_error=str(exc)[:500], updated_at=timezone.now())
        return not exc.is_transient
    sent.update(status=Status.CLOSED, last_error="", updated_at=timezone.now())
    return True


def lost(*, now=None, limit: int = 200) -> tuple[list[int], list[int]]:
    """(notifications to send again, to close again): untouched for HITL_PUSH_STALE_SECONDS while
    their task should have moved them (a Redis restart, a killed worker, a push service down)."""
    now = now or timezone.now()
    old = PushNotification.objects.filter(updated_at__lt=now - timedelta(seconds=settings.HITL_PUSH_STALE_SECONDS))
    to_send = old.filter(status=Status.QUEUED, attempts__lt=max_attempts(), approval__status=Approval.Status.PENDING)
    to_close = old.filter(Q(status=Status.SENT) | Q(status=Status.QUEUED)).exclude(approval__status=Approval.Status.PENDING)
    resend = list(to_send.values_list("pk", flat=True)[:limit])
    reclose = list(to_close.values_list("pk", flat=True)[:limit])
    PushNotification.objects.filter(pk__in=resend + reclose).update(updated_at=now)  # the next sweep leaves them to these tasks
    return resend, reclose


def ttl(approval: Approval) -> int:
    """How long the push service keeps it for an offline device: no longer than the approval waits."""
    if approval.expires_at is None:
        return DEFAULT_TTL
    return max(int((approval.expires_at - timezone.now()).total_seconds()), 0)


def max_attempts() -> int:
    return settings.HITL_PUSH_RETRIES + 1


def _failed(row: PushNotification, mine, exc: pushservice.PushFailed) -> str:
    logger.warning("push: sending approval %s to %s failed: %s", row.approval_id, row.device, exc)
    if exc.is_gone:
        _remove(row.subscription)
        mine.update(status=Status.FAILED, last_error=f"{exc} (the push service forgot this device: removed)"[:500])
    elif not exc.is_transient or row.attempts + 1 >= max_attempts():
        mine.update(status=Status.FAILED, last_error=str(exc))
    else:
        mine.update(last_error=str(exc), updated_at=timezone.now())
    return Sent.FAILED


def _remove(subscription: PushSubscription | None) -> None:
    if subscription is not None:
        PushSubscription.objects.filter(pk=subscription.pk).delete()


def still_queued(notification_id: int) -> bool:
    """Whether a failed send is worth retrying (a permanent failure or a removed device is not)."""
    return PushNotification.objects.filter(pk=notification_id, status=Status.QUEUED).exists()
