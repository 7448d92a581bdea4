"""Thin Celery tasks: deliver a webhook (with retries and backoff), resend deliveries whose task was
lost, warn of approvals about to expire and expire overdue ones, remind and escalate routed ones."""
from celery import shared_task
from django.conf import settings

from . import reviewer, services
from .announcements import webhooks
from .deciders import escalation


@shared_task(bind=True, ignore_result=True, acks_late=True)
def deliver_webhook(self, delivery_id: int, attempt: int = 1) -> None:
    # Runs apart from the agent loop, so a receiver that is down never holds a conversation up.
    # Counted by the stored attempt number, not Celery's retries: a chain the sweep restarts goes on
    # from where the lost one stopped, and one plus HITL_WEBHOOK_RETRIES attempts is all there is.
    outcome = webhooks.deliver(delivery_id, attempt=attempt)
    if outcome is not webhooks.Attempt.FAILED:
        return
    if attempt >= webhooks.max_attempts():
        webhooks.give_up(delivery_id)
        return
    backoff = settings.HITL_WEBHOOK_BACKOFF * 2 ** (attempt - 1)
    raise self.retry(args=(delivery_id, attempt + 1), countdown=backoff, max_retries=None)


@shared_task(ignore_result=True)
def resend_lost_webhooks() -> None:
    # A delivery whose task went with a Redis restart would otherwise stay pending for ever.
    for delivery_id, attempt in webhooks.claim_lost():
        deliver_webhook.delay(delivery_id, attempt)


@shared_task(ignore_result=True, acks_late=True)
def review_call(approval_id: int) -> None:
    # acks_late: a worker lost mid-review leaves the task to another; a review lost for good is
    # escalated to a person by escalate_overdue_reviews.
    reviewer.review(approval_id)


@shared_task(ignore_result=True)
def escalate_overdue_reviews() -> None:
    reviewer.escalate_overdue()


@shared_task(ignore_result=True)
def expire_overdue_approvals() -> None:
    services.expire_overdue()


@shared_task(ignore_result=True)
def warn_expiring_approvals() -> None:
    # Each warning is marked by a conditional update before it is sent: a restarted beat, or two
    # sweeps at once, never warn twice.
    services.warn_expiring()


@shared_task(ignore_result=True)
def remind_and_escalate() -> None:
    # Durable without a schedule of its own: each approval stores when it is due and whether it was
    # done, so a beat restart between the two (or a missed run) sends each once, late at worst.
    escalation.send_due_reminders()
    escalation.escalate_due()
