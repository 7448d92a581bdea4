"""approvals' own reactions to its events: tell the dashboards, and queue the webhooks."""
from hitl import live
from hitl.celery import enqueue_on_commit

from . import webhooks
from .fragments import dashboard_signal_html
from .models import Webhook
from .tasks import deliver_webhook


def on_approval_requested(sender, approval, **kwargs) -> None:
    _announce([approval], Webhook.Event.REQUESTED)


def on_approvals_decided(sender, approvals, **kwargs) -> None:
    _announce(approvals, Webhook.Event.DECIDED)


def on_approval_edited(sender, approval, **kwargs) -> None:
    # The dashboards re-read the row; webhooks hear of the approval again when it is decided.
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html("approval.edited"))


def _announce(approvals, event: str) -> None:
    # One signal however many were decided: each open dashboard re-reads its list once.
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html(event, len(approvals)))
    for delivery_id in webhooks.create_deliveries(approvals, event):
        enqueue_on_commit(deliver_webhook, delivery_id)
