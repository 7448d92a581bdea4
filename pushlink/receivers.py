"""Push hears of the decision service's events like every other surface."""
from hitl.celery import enqueue_on_commit

from . import pushservice, requests
from .models import PushNotification
from .tasks import close_notifications, send_notification


def on_approval_requested(sender, approval=None, **kwargs) -> None:
    for notification_id in requests.queue(approval):
        enqueue_on_commit(send_notification, notification_id)


def on_approval_edited(sender, approval=None, **kwargs) -> None:
    # The devices shown the old version get the new one (the old tokens decide nothing now).
    for notification_id in requests.requeue_edited(approval):
        enqueue_on_commit(send_notification, notification_id)


def on_approvals_escalated(sender, approvals=(), **kwargs) -> None:
    # Escalated: the escalation groups' members may decide it now. Reminded: devices turned on since
    # the request get it (a device already notified is not notified twice).
    for approval in approvals:
        on_approval_requested(sender, approval)


def on_approvals_expiring(sender, approvals=(), **kwargs) -> None:
    # Each device that got the request is warned once, in place of the request (same tag).
    for notification_id in requests.queue_warnings(approvals):
        enqueue_on_commit(send_notification, notification_id)


def on_approval_extended(sender, approval=None, **kwargs) -> None:
    # The request again, with its actions, in place of the warning; the new deadline warns anew.
    for notification_id in requests.requeue_extended(approval):
        enqueue_on_commit(send_notification, notification_id)


def on_approvals_decided(sender, approvals=(), **kwargs) -> None:
    if not pushservice.enabled():
        return
    open_ = (PushNotification.Status.QUEUED, PushNotification.Status.SENT)
    ids = list(PushNotification.objects.filter(approval__in=[a.pk for a in approvals], status__in=open_).values_list("pk", flat=True))
    if ids:
        enqueue_on_commit(close_notifications, ids)
