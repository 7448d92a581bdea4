"""Whose devices get a request, and the life of each notification: queued, sent (claimed by a
conditional update, so a retry and the sweep never both send), then replaced by the outcome."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from approvals import routing, tokens
from approvals.models import Approval

from . import pushservice, texts
from .models import PushNotification, PushSubscription

logger = logging.getLogger(__name__)
Status = PushNotification.Status
DEFAULT_TTL = 24 * 3600


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
            approval=approval, subscription=subscription, defaults={"user_id": subscription.user_id, "device": subscription.device}
        )
        for subscription in recipients(approval)
    ]
    return [row.pk for row, created in rows if created]


def requeue_edited(approval: Approval) -> list[int]:
    """After an edit: every device that was shown the old version gets the new one (its tokens
    decide only the version they were issued for), and new deciders get it too."""
    if not pushservice.enabled() or approval.status != Approval.Status.PENDING:
        return []
    deciders = [subscription.pk for subscription in recipients(approval)]
    shown = PushNotification.objects.filter(approval=approval, subscription_id__in=deciders).exclude(status=Status.CLOSED)
    # attempts=0 also voids a send in flight: its final conditional update finds nothing to mark.
    again = list(shown.values_list("pk", flat=True))
    PushNotification.objects.filter(pk__in=again).update(status=Status.QUEUED, attempts=0, last_error="", updated_at=timezone.now())
    return again + queue(approval)


def send(notification_id: int) -> str:
    """Send one queued notification, if it is still to be sent and its approval still waits."""
    claimed = PushNotification.objects.filter(pk=notification_id, status=Status.QUEUED, attempts__lt=max_attempts())
    row = claimed.select_related("subscription", "user", "approval__tool_call", "approval__conversation__agent").first()
    if row is None or not claimed.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    mine = PushNotification.objects.filter(pk=row.pk, status=Status.QUEUED, attempts=row.attempts + 1)
    approval, subscription = row.approval, row.subscription
    if subscription is None:
        mine.update(status=Status.CLOSED, last_error="The device was removed.")
        return Sent.CLOSED
    if approval.status != Approval.Status.PENDING:
        mine.update(status=Status.CLOSED)
        return Sent.CLOSED
    offered = None
    if texts.offers_actions(approval):
        offered = {decision: tokens.issue(approval, row.user, channel="push") for decision in ("approve", "reject")}
    try:
        pushservice.push(subscription.subscription_info(), texts.request(approval, offered), ttl=ttl(approval), topic=texts.tag(approval))
    except pushservice.PushFailed as exc:
        return _failed(row, mine, exc)
    mine.update(status=Status.SENT, shown_hash=approval.shown_hash, last_error="", updated_at=timezone.now())
    return Sent.SENT


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
