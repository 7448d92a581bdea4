"""Thin Celery tasks: send a request (retried with backoff), update messages to the outcome or
rewrite them while they wait, send a reminder or a warning, and the sweep that picks up what a lost
task or signal left."""
from celery import shared_task

from . import reminders, requests, verification


def _backoff(task) -> int:
    return 2 ** min(task.request.retries, 6)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_request(self, message_id: int) -> None:
    sent = requests.send(message_id)
    if sent == requests.Sent.FAILED:
        raise self.retry(countdown=_backoff(self), max_retries=requests.max_attempts())
    for warning_id in reminders.queue_late_warnings(message_id) if sent == requests.Sent.SENT else []:
        send_reminder.delay(warning_id)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def close_messages(self, message_ids: list[int]) -> None:
    if failed := [message_id for message_id in message_ids if not requests.close(message_id)]:
        raise self.retry(args=(failed,), countdown=_backoff(self), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def refresh_messages(self, message_ids: list[int]) -> None:
    if failed := [message_id for message_id in message_ids if not requests.refresh(message_id)]:
        raise self.retry(args=(failed,), countdown=_backoff(self), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_reminder(self, reminder_id: int) -> None:
    if reminders.send(reminder_id) == requests.Sent.FAILED:
        raise self.retry(countdown=_backoff(self), max_retries=requests.max_attempts())


@shared_task(ignore_result=True)
def resend_lost_messages() -> None:
    resend, reclose, rewrite = requests.lost()
    for message_id in resend:
        send_request.delay(message_id)
    if reclose:
        close_messages.delay(reclose)
    if rewrite:
        refresh_messages.delay(rewrite)
    for reminder_id in reminders.lost() + reminders.queue_missed_warnings():
        send_reminder.delay(reminder_id)
    verification.forget_old()
