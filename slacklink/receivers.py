"""Slack hears of the decision service's events like every other surface."""
from hitl.celery import enqueue_on_commit

from . import client, reminders, requests
from .models import SlackMessage
from .tasks import close_messages, refresh_messages, send_reminder, send_request


def on_approval_requested(sender, approval, **kwargs) -> None:
    for message_id in requests.queue(approval):
        enqueue_on_commit(send_request, message_id)


def on_approval_edited(sender, approval, **kwargs) -> None:
    # Every copy shows the edit (with buttons for it), and a stricter edit's new approvers get it now.
    if ids := requests.to_refresh(approval):
        enqueue_on_commit(refresh_messages, ids)
    on_approval_requested(sender, approval)


def on_approvals_decided(sender, approvals, **kwargs) -> None:
    if not client.enabled():
        return
    ids = list(SlackMessage.objects.filter(
        approval__in=[a.pk for a in approvals], status__in=(SlackMessage.Status.QUEUED, SlackMessage.Status.SENT)
    ).values_list("pk", flat=True))
    if ids:
        enqueue_on_commit(close_messages, ids)


def on_approval_voted(sender, approval, **kwargs) -> None:
    # Still pending: every copy counts the votes now, its buttons kept for the others.
    if ids := requests.to_refresh(approval):
        enqueue_on_commit(refresh_messages, ids)


def on_approvals_reminded(sender, approvals, **kwargs) -> None:
    for approval in approvals:
        on_approval_requested(sender, approval)  # linked since the request: they get the request itself
        for reminder_id in reminders.queue(approval):
            enqueue_on_commit(send_reminder, reminder_id)


def on_approvals_expiring(sender, approvals, **kwargs) -> None:
    # Each sent copy gets a warning in its thread, with an Extend button.
    for approval in approvals:
        for warning_id in reminders.queue_warnings(approval):
            enqueue_on_commit(send_reminder, warning_id)


def on_approval_extended(sender, approval, **kwargs) -> None:
    # Every copy shows the new deadline.
    if ids := requests.to_refresh(approval):
        enqueue_on_commit(refresh_messages, ids)


def on_approvals_escalated(sender, approvals, **kwargs) -> None:
    # The escalation groups' members may decide it now: they get the request, as its approvers did.
    for approval in approvals:
        on_approval_requested(sender, approval)
