"""Email hears of the decision service's events like every other surface."""
from hitl.celery import enqueue_on_commit

from . import requests
from .tasks import send_mail


def on_approval_requested(sender, approval=None, **kwargs) -> None:
    for delivery_id in requests.queue(approval):
        enqueue_on_commit(send_mail, delivery_id)


def on_approval_edited(sender, approval=None, **kwargs) -> None:
    # A sent mail's link decides nothing now (its version is gone): each gets a mail of the new version.
    for delivery_id in requests.requeue_edited(approval):
        enqueue_on_commit(send_mail, delivery_id)


def on_approvals_escalated(sender, approvals=(), **kwargs) -> None:
    for approval in approvals:  # the escalation groups' members may decide it now
        on_approval_requested(sender, approval)


def on_approvals_reminded(sender, approvals=(), **kwargs) -> None:
    for approval in approvals:
        for delivery_id in requests.queue_reminders(approval):
            enqueue_on_commit(send_mail, delivery_id)


def on_approvals_decided(sender, approvals=(), **kwargs) -> None:
    # A mail cannot be taken back: its link now opens a page saying who decided. What is still queued is never sent.
    requests.close_unsent([approval.pk for approval in approvals])


def on_approvals_expiring(sender, approvals=(), **kwargs) -> None:
    # Each person mailed the request hears, once, that it expires soon; the site is where Extend is.
    for approval in approvals:
        for delivery_id in requests.queue_warnings(approval):
            enqueue_on_commit(send_mail, delivery_id)
