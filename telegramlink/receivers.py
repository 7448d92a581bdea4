"""Telegram hears of the decision service's events like every other surface."""
from hitl.celery import enqueue_on_commit

from . import bot, requests
from .models import ApprovalMessage
from .tasks import close_messages, send_request


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
