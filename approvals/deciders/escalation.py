"""Reminders and escalation of routed approvals nobody decided in time, run by beat.

Each is a conditional UPDATE that stamps the approval (`reminded_at`, `escalated_at`) only if it is
still pending and not yet stamped, in the transaction that writes its webhook outbox: a beat or
worker restart loses nothing (the next sweep finds what is still due) and nothing is sent twice
(a second sweep, or a sweep racing another, updates 0 rows). Expiry still ends an approval: an
overdue one is neither reminded nor escalated.
"""
import logging

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..announcements import webhooks
from ..models import Approval, Webhook
from ..signals import approvals_escalated, approvals_reminded

logger = logging.getLogger(__name__)


def send_due_reminders(*, now=None, limit: int = 500) -> list[int]:
    """Remind the approvers of every routed approval whose reminder is due: once each."""
    return _stamp_due("remind_at", "reminded_at", Webhook.Event.REMINDER, approvals_reminded, now=now, limit=limit)


def escalate_due(*, now=None, limit: int = 500) -> list[int]:
    """Let the escalation groups decide every routed approval whose escalation is due: once each."""
    return _stamp_due("escalate_at", "escalated_at", Webhook.Event.ESCALATED, approvals_escalated, now=now, limit=limit)


def _stamp_due(due_field: str, done_field: str, event: str, signal, *, now, limit: int) -> list[int]:
    now = now or timezone.now()
    due = Approval.objects.filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now),
        status=Approval.Status.PENDING, **{f"{due_field}__lte": now, f"{done_field}__isnull": True},
    )
    stamped = []
    for approval in due.select_related("tool_call").order_by(due_field, "pk")[:limit]:
        with transaction.atomic():
            if not due.filter(pk=approval.pk).update(**{done_field: now}):
                continue  # decided, expired or stamped by another sweep a moment ago
            setattr(approval, done_field, now)
            deliveries = webhooks.create_deliveries([approval], event)
            transaction.on_commit(
                lambda approval=approval, deliveries=deliveries: signal.send(
                    sender=Approval, approvals=[approval], deliveries=deliveries
                ),
                robust=True,
            )
        stamped.append(approval.pk)
    if stamped:
        logger.info("%s: approvals %s", event, stamped)
    return stamped
