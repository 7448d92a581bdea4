"""Thin Celery tasks: send one mail (retried with backoff) and the sweep that picks up what a lost task left."""
from celery import shared_task

from . import requests


def _backoff(retries: int) -> int:
    return 2 ** min(retries, 6)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_mail(self, delivery_id: int) -> None:
    if requests.send(delivery_id) == requests.Sent.FAILED and requests.still_queued(delivery_id):
        raise self.retry(countdown=_backoff(self.request.retries), max_retries=requests.max_attempts())


@shared_task(ignore_result=True)
def resend_lost_mails() -> None:
    for delivery_id in requests.lost():
        send_mail.delay(delivery_id)
