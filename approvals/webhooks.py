"""Webhooks: who to tell about an approval event, what to send, how it is signed and delivered."""
import hashlib
import hmac
import json
import logging

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from chat.models import Conversation

from .models import Approval, Webhook, WebhookDelivery

logger = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Hitl-Signature"


def sign(body: bytes, secret: str) -> str:
    """`sha256=<hex HMAC-SHA256 of the exact body>`: what a receiver recomputes to trust a call."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def payload(approval: Approval, event: str) -> dict:
    call = approval.tool_call
    conversation_url = f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{call.pk}"
    return {
        "event": event,
        "sent_at": timezone.now().isoformat(),
        "approval": {
            "id": approval.pk,
            "status": approval.status,
            "reason": approval.reason,
            "risk": approval.risk,
            "approver_required": approval.approver_required,
            "requested_at": approval.requested_at.isoformat(),
            "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
            "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
            "decided_by": approval.decided_by.get_username() if approval.decided_by else None,
            "decided_via": approval.decided_via or None,
            "rejection_reason": approval.rejection_reason,
        },
        "tool": {"call_id": call.pk, "name": call.name, "arguments": call.arguments},
        "conversation": {"id": str(approval.conversation_id), "url": conversation_url},
    }


def create_deliveries(approvals: list[Approval], event: str) -> list[int]:
    """One delivery row per approval and active webhook of its conversation's agent (or global).
    Payloads are built only when there is someone to send them to: most approvals have no webhook."""
    active = list(Webhook.objects.filter(is_active=True))  # a handful at most, and usually none
    if not active:
        return []
    conversation_ids = {approval.conversation_id for approval in approvals}
    agent_of = dict(Conversation.objects.filter(pk__in=conversation_ids).values_list("pk", "agent_id"))
    with transaction.atomic():
        return [
            WebhookDelivery.objects.create(webhook=webhook, approval=approval, event=event, payload=payload(approval, event)).pk
            for approval in approvals
            for webhook in active
            if webhook.agent_id in (None, agent_of[approval.conversation_id])
        ]


def deliver(delivery_id: int) -> bool:
    """One attempt: POST the signed payload; True when the receiver answered 2xx."""
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    body = json.dumps(delivery.payload, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Hitl-Event": delivery.event,
        "X-Hitl-Delivery": str(delivery.pk),
        SIGNATURE_HEADER: sign(body, delivery.webhook.secret),
    }
    status_code, error = None, ""
    try:
        response = httpx.post(delivery.webhook.url, content=body, headers=headers, timeout=settings.HITL_WEBHOOK_TIMEOUT)
        status_code = response.status_code
        if not response.is_success:
            error = f"HTTP {response.status_code}"
    except httpx.HTTPError as exc:
        error = f"{exc.__class__.__name__}: {exc}"[:500]
    succeeded = not error
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        attempts=F("attempts") + 1,
        last_status_code=status_code,
        last_error=error,
        status=WebhookDelivery.Status.SUCCEEDED if succeeded else WebhookDelivery.Status.PENDING,
    )
    if not succeeded:
        logger.warning("webhook delivery %s failed: %s", delivery.pk, error)
    return succeeded


def give_up(delivery_id: int) -> None:
    WebhookDelivery.objects.filter(pk=delivery_id).update(status=WebhookDelivery.Status.FAILED)
