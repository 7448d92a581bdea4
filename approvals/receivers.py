"""approvals' own reactions to its events: tell the dashboards, and queue the webhooks."""
from hitl import live
from hitl.celery import enqueue_on_commit

from . import webhooks
from .fragments import dashboard_signal_html
from .models import Webhook
from .tasks import deliver_webhook


def on_approval_requested(sender, approval, **kwargs) -> None:
    _announce(approval, Webhook.Event.REQUESTED)


def on_approval_decided(sender, approval, **kwargs) -> None:
    _announce(approval, Webhook.Event.DECIDED)


def _announce(approval, event: str) -> None:
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html(event, approval.pk))
    for delivery_id in webhooks.create_deliveries(approval, event):
        enqueue_on_commit(deliver_webhook, delivery_id)
