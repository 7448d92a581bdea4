"""Thin Celery tasks: send one mail (retried with backoff) and the sweep that picks up what a lost
task or a lost approvals_expiring left."""
from celery import shared_task

from . import requests


def _backoff(retries: int) -> int:
    return 2 ** min(retries, 6)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_mail(self, delivery_id: int) -> None:
    sent = requests.send(delivery_id)
    if sent == requests.Sent.FAILED and requests.still_queued(delivery_id):
        raise self.retry(countdown=_backoff(self.request.retries), max_retries=requests.max_attempts())
    for warning_id in requests.queue_late_warnings(delivery_id) if sent == requests.Sent.SENT else []:
        send_mail.delay(warning_id)


@shared_task(ignore_result=True)
def resend_lost_mails() -> None:
    for delivery_id in requests.lost() + requests.queue_missed_warnings():
        send_mail.delay(delivery_id)
