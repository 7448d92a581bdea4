"""Thin Celery tasks: send a notification (retried with backoff), replace notifications by the
outcome, and the sweep that picks up what a lost task or a lost approvals_expiring left."""
from celery import shared_task

from . import requests


def _backoff(retries: int) -> int:
    return 2 ** min(retries, 6)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_notification(self, notification_id: int) -> None:
    sent = requests.send(notification_id)
    if sent == requests.Sent.FAILED and requests.still_queued(notification_id):
        raise self.retry(countdown=_backoff(self.request.retries), max_retries=requests.max_attempts())
    for warning_id in requests.queue_late_warnings(notification_id) if sent == requests.Sent.SENT else []:
        send_notification.delay(warning_id)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def close_notifications(self, notification_ids: list[int]) -> None:
    failed = [notification_id for notification_id in notification_ids if not requests.close(notification_id)]
    if failed:
        raise self.retry(args=(failed,), countdown=_backoff(self.request.retries), max_retries=requests.max_attempts())


@shared_task(ignore_result=True)
def resend_lost_notifications() -> None:
    resend, reclose = requests.lost()
    for notification_id in resend + requests.queue_missed_warnings():
        send_notification.delay(notification_id)
    if reclose:
        close_notifications.delay(reclose)
