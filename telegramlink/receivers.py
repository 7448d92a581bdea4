"""Telegram hears of the decision service's events like every other surface."""
from hitl.celery import enqueue_on_commit

from . import bot, followups, requests
from .models import ApprovalMessage
from .tasks import close_messages, send_reminder, send_request, send_warning, show_deadline, show_votes


def on_approval_requested(sender, approval, **kwargs) -> None:
    for message_id in requests.queue(approval):
        enqueue_on_commit(send_request, message_id)


def on_approval_edited(sender, approval, **kwargs) -> None:
    # A stricter edit may hand the call to the approvers (four eyes): they get it now.
    on_approval_requested(sender, approval)


def on_approvals_decided(sender, approvals, **kwargs) -> None:
    if not bot.enabled():
        return
    ids = list(
        ApprovalMessage.objects.filter(
            approval__in=[a.pk for a in approvals], status__in=(ApprovalMessage.Status.QUEUED, ApprovalMessage.Status.SENT)
        ).values_list("pk", flat=True)
    )
    if ids:
        enqueue_on_commit(close_messages, ids)


def on_approval_voted(sender, approval, **kwargs) -> None:
    # Still pending: every copy counts the votes now, its buttons kept for the others.
    if ids := followups.to_rewrite(approval):
        enqueue_on_commit(show_votes, ids)


def on_approvals_reminded(sender, approvals, **kwargs) -> None:
    for approval in approvals:
        on_approval_requested(sender, approval)  # linked since the request: they get the request itself
        for reminder_id in followups.queue_reminders(approval):
            enqueue_on_commit(send_reminder, reminder_id)


def on_approvals_escalated(sender, approvals, **kwargs) -> None:
    # The escalation groups' members may decide it now: they get the request, as its approvers did.
    for approval in approvals:
        on_approval_requested(sender, approval)


def on_approvals_expiring(sender, approvals, **kwargs) -> None:
    # Each sent request gets its warning, with an Extend button, as a reply.
    for approval in approvals:
        for warning_id in followups.queue_warnings(approval):
            enqueue_on_commit(send_warning, warning_id)


def on_approval_extended(sender, approval, **kwargs) -> None:
    # Every copy shows the new deadline, and the warnings' Extend buttons go.
    if ids := followups.to_rewrite(approval):
        enqueue_on_commit(show_deadline, ids)
