"""Webhooks: who to tell about an approval event, what to send, how it is signed and delivered."""
import enum
import hashlib
import hmac
import json
import logging
import re
import time
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..deciders import votes
from ..models import Approval, Webhook, WebhookDelivery

logger = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Hitl-Signature"
# How far a receiver lets a call's signed timestamp stray from its clock. Older calls are replays;
# within the window a receiver drops a `delivery_id` it has already handled.
SIGNATURE_TOLERANCE_SECONDS = 300
# A pending delivery untouched this long lost its task (a Redis restart, a killed worker): the sweep
# sends it again. Longer than an attempt can take (HITL_WEBHOOK_TIMEOUT), so it never takes a call
# still out for lost; a retry merely waiting its backoff may be resent, and then the claim in
# deliver() lets only one of the two make the attempt.
DEFAULT_STALE_SECONDS = 300.0


def sign(body: bytes, secret: str, *, timestamp: int) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. The timestamp is inside the MAC, so a
    captured call cannot be replayed later under a fresh one, and the body names its delivery."""
    return f"t={timestamp},v1={_mac(secret, timestamp, body)}"


def verify(
    header: str, body: bytes, secret: str, now: float | None = None, tolerance: float = SIGNATURE_TOLERANCE_SECONDS
) -> bool:
    """What a receiver written in Python checks: `header` signs exactly `body` with `secret`, at a time
    within `tolerance` seconds of `now` (default: this machine's clock). Never raises on garbage."""
    fields = [part.strip().partition("=") for part in header.split(",")]
    timestamps = [value for key, _, value in fields if key == "t"]
    signatures = [value.encode() for key, _, value in fields if key == "v1"]
    if len(timestamps) != 1 or not re.fullmatch(r"[0-9]{1,15}", timestamps[0]):
        return False
    timestamp = int(timestamps[0])
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = _mac(secret, timestamp, body).encode()
    return any(hmac.compare_digest(expected, signature) for signature in signatures)


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


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
            "arguments": call.arguments,
            "approved_arguments": approval.approved_arguments,
            "edited_by": approval.edited_by.get_username() if approval.edited_by else None,
            "preview": approval.preview,
            "confirmation_required": approval.confirmation_required,
            "confirmation_hint": approval.confirmation_hint,
            "kind": approval.kind,
            "question": approval.question,
            "plan": approval.plan,
            "answer": approval.answer,
            "rule_id": approval.rule_id,
            "route": approval.route_id,
            "quorum": approval.quorum,
            "votes": [vote | {"decided_at": vote["decided_at"].isoformat()} for vote in votes.as_dicts(approval)],
            "on_behalf_of": approval.on_behalf_of.get_username() if approval.on_behalf_of_id else None,
            "escalated_at": approval.escalated_at.isoformat() if approval.escalated_at else None,
            "reminded_at": approval.reminded_at.isoformat() if approval.reminded_at else None,
        },
        "tool": {"call_id": call.pk, "name": call.name, "arguments": call.arguments},
        "conversation": {"id": str(approval.conversation_id), "url": conversation_url},
    }


def create_deliveries(approvals: list[Approval], event: str) -> list[int]:
    """One delivery row per approval and active webhook of its conversation's agent (or global).
    Payloads are built only when there is someone to send them to: most approvals have no webhook.
    Decisions write theirs in the deciding transaction (an outbox: approvals.announcements)."""
    active = list(Webhook.objects.filter(is_active=True))  # a handful at most, and usually none
    if not active:
        return []
    rows = Approval.objects.filter(pk__in=[approval.pk for approval in approvals])
    agent_of = dict(rows.values_list("conversation_id", "conversation__agent_id"))
    deliveries = [
        WebhookDelivery(webhook=webhook, approval=approval, event=event, payload=payload(approval, event))
        for approval in approvals
        for webhook in active
        if webhook.agent_id in (None, agent_of[approval.conversation_id])
    ]
    with transaction.atomic():  # all or none, however many batches
        return [delivery.pk for delivery in WebhookDelivery.objects.bulk_create(deliveries)]


class Attempt(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # recorded; still pending, for a retry or give_up()
    NOT_CLAIMED = "not claimed"  # another task made this attempt, or the delivery is no longer pending


def max_attempts() -> int:
    return settings.HITL_WEBHOOK_RETRIES + 1


def deliver(delivery_id: int, *, attempt: int) -> Attempt:
    """Make attempt number `attempt` (from 1): claim it, POST the signed payload, record the answer.

    The claim moves `attempts` from `attempt - 1` to `attempt` in one conditional update before
    anything is sent, so of two tasks meaning to make the same attempt (a retry and the sweep's
    resend, or a message the broker delivered twice) exactly one sends; the other updates 0 rows.
    It also stamps `updated_at`, which keeps the sweep off a call that is still out.
    """
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookDelivery.Status.PENDING, attempts=attempt - 1
    ).update(attempts=attempt, updated_at=timezone.now())
    if not claimed:
        return Attempt.NOT_CLAIMED
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    # The stored payload is built before its row exists; the id goes in as it is sent, under the
    # signature, so a receiver can trust it to drop a repeat.
    body = json.dumps({"delivery_id": delivery.pk, **delivery.payload}, separators=(",", ":")).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Hitl-Event": delivery.event,
        "X-Hitl-Delivery": str(delivery.pk),
        SIGNATURE_HEADER: sign(body, delivery.webhook.secret, timestamp=int(time.time())),
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
    WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.PENDING, attempts=attempt).update(
        last_status_code=status_code,
        last_error=error,
        status=WebhookDelivery.Status.SUCCEEDED if succeeded else WebhookDelivery.Status.PENDING,
        updated_at=timezone.now(),
    )
    if not succeeded:
        logger.warning("webhook delivery %s failed: %s", delivery.pk, error)
    return Attempt.SUCCEEDED if succeeded else Attempt.FAILED


def give_up(delivery_id: int) -> None:
    # Only a pending delivery: a duplicate task's success is never overwritten.
    WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING).update(
        status=WebhookDelivery.Status.FAILED, updated_at=timezone.now()
    )


def claim_lost(*, now: datetime | None = None, limit: int = 500) -> list[tuple[int, int]]:
    """Pending deliveries nobody has touched for HITL_WEBHOOK_STALE_SECONDS, whose task was lost:
    those with attempts left are claimed and returned as (delivery_id, next attempt) to enqueue;
    those without are marked failed.

    Each claim is a conditional update that stamps `updated_at`, so a second sweep running at the
    same time (or just after) finds the row fresh and leaves it alone.
    """
    now = now or timezone.now()
    stale_for = timedelta(seconds=getattr(settings, "HITL_WEBHOOK_STALE_SECONDS", DEFAULT_STALE_SECONDS))
    lost = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, updated_at__lt=now - stale_for)
    exhausted = lost.filter(attempts__gte=max_attempts()).update(status=WebhookDelivery.Status.FAILED, updated_at=now)
    claimed = []
    resendable = lost.filter(attempts__lt=max_attempts()).order_by("updated_at")
    for delivery_id, attempts in resendable.values_list("pk", "attempts")[:limit]:
        if lost.filter(pk=delivery_id, attempts=attempts).update(updated_at=now):
            claimed.append((delivery_id, attempts + 1))
    if exhausted or claimed:
        logger.info("webhook sweep: resending %s, gave up on %s", [pk for pk, _ in claimed], exhausted)
    return claimed
