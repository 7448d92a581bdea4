"""Thin Celery tasks: deliver a webhook (with retries and backoff), expire overdue approvals."""
from celery import shared_task
from django.conf import settings

from . import services, webhooks


@shared_task(bind=True, ignore_result=True, acks_late=True)
def deliver_webhook(self, delivery_id: int) -> None:
    # Runs apart from the agent loop, so a receiver that is down never holds a conversation up.
    if webhooks.deliver(delivery_id):
        return
    if self.request.retries >= settings.HITL_WEBHOOK_RETRIES:
        webhooks.give_up(delivery_id)
        return
    raise self.retry(countdown=settings.HITL_WEBHOOK_BACKOFF * 2**self.request.retries, max_retries=None)


@shared_task(ignore_result=True)
def expire_overdue_approvals() -> None:
    services.expire_overdue()
