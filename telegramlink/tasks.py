"""Thin Celery tasks: send a request (retried with backoff), edit messages to the outcome, to the
votes cast or to an extended deadline, send a reminder or an expiry warning, and the sweep that
picks up what a lost task left."""
from celery import shared_task

from . import followups, requests


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_request(self, message_id: int) -> None:
    sent = requests.send(message_id)
    if sent == requests.Sent.SENT:
        for warning_id in followups.queue_warnings_sent_before(message_id):
            send_warning.delay(warning_id)
    if sent == requests.Sent.FAILED:
        raise self.retry(countdown=2 ** min(self.request.retries, 6), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def close_messages(self, message_ids: list[int]) -> None:
    failed = [message_id for message_id in message_ids if not requests.close(message_id)]
    for message_id in message_ids:
        followups.retire_warnings(message_id)
    if failed:
        raise self.retry(args=(failed,), countdown=2 ** min(self.request.retries, 6), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def show_votes(self, message_ids: list[int]) -> None:
    failed = [message_id for message_id in message_ids if not followups.show_votes(message_id)]
    if failed:
        raise self.retry(args=(failed,), countdown=2 ** min(self.request.retries, 6), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def show_deadline(self, message_ids: list[int]) -> None:
    failed = [message_id for message_id in message_ids if not followups.rewrite(message_id)]
    for message_id in message_ids:
        followups.retire_warnings(message_id)
    if failed:
        raise self.retry(args=(failed,), countdown=2 ** min(self.request.retries, 6), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_warning(self, warning_id: int) -> None:
    if followups.warn(warning_id) == requests.Sent.FAILED:
        raise self.retry(countdown=2 ** min(self.request.retries, 6), max_retries=requests.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send_reminder(self, reminder_id: int) -> None:
    if followups.remind(reminder_id) == requests.Sent.FAILED:
        raise self.retry(countdown=2 ** min(self.request.retries, 6), max_retries=requests.max_attempts())


@shared_task(ignore_result=True)
def resend_lost_messages() -> None:
    resend, reclose = requests.lost()
    for message_id in resend:
        send_request.delay(message_id)
    if reclose:
        close_messages.delay(reclose)
    reminders, warnings, reshow = followups.lost()
    for reminder_id in reminders:
        send_reminder.delay(reminder_id)
    for warning_id in warnings:
        send_warning.delay(warning_id)
    if reshow:
        show_votes.delay(reshow)
