"""Thin Celery tasks, the same for every channel (named by its registry key): send a row (retried
with backoff), update copies to the outcome, rewrite copies that wait, and the one sweep that picks
up what a lost task or a lost signal left on every channel."""
from datetime import timedelta

from celery import shared_task
from django.apps import apps
from django.utils import timezone

from approvals.models import Approval
from hitl.celery import enqueue_on_commit

from . import channels, outbox


def _backoff(task) -> int:
    return 2 ** min(task.request.retries, 6)


def label(model) -> str:
    return model._meta.label


def send_later(channel, rows) -> None:
    """Enqueue, once the transaction commits, the send of each (model, id) or delivery id."""
    for row in rows:
        model, pk = row if isinstance(row, tuple) else (channel.delivery, row)
        enqueue_on_commit(send, channel.name, label(model), pk)


def close_later(channel, ids: list[int]) -> None:
    if ids:
        enqueue_on_commit(close, channel.name, ids)


def rewrite_later(channel, ids: list[int]) -> None:
    if ids:
        enqueue_on_commit(rewrite, channel.name, ids)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def send(self, channel_name: str, model_label: str, pk: int) -> None:
    channel, model = channels.get(channel_name), apps.get_model(model_label)
    sent = outbox.send(channel, model, pk)
    if sent == outbox.Sent.FAILED and outbox.still_queued(model, pk):
        raise self.retry(countdown=_backoff(self), max_retries=channel.max_attempts())
    if sent == outbox.Sent.SENT and model is channel.delivery:
        # Sent after its approval was warned (a retried send, or a wait so short it is warned at
        # once): it missed approvals_expiring, not the warning.
        row = channel.delivery.objects.select_related("approval").filter(pk=pk).first()
        if row is not None and row.approval.warned_at is not None:
            for model_, pk_ in channel.queue_warnings(row.approval):
                send.delay(channel.name, label(model_), pk_)


@shared_task(bind=True, ignore_result=True, acks_late=True)
def close(self, channel_name: str, ids: list[int]) -> None:
    channel = channels.get(channel_name)
    if failed := [pk for pk in ids if not outbox.close(channel, pk)]:
        raise self.retry(args=(channel_name, failed), countdown=_backoff(self), max_retries=channel.max_attempts())


@shared_task(bind=True, ignore_result=True, acks_late=True)
def rewrite(self, channel_name: str, ids: list[int]) -> None:
    channel = channels.get(channel_name)
    if failed := [pk for pk in ids if not outbox.rewrite(channel, pk)]:
        raise self.retry(args=(channel_name, failed), countdown=_backoff(self), max_retries=channel.max_attempts())


def sweep_channel(channel, *, now=None, limit: int = 200) -> None:
    """Enqueue again what a lost task left (outbox.lost), and the warnings a lost signal never queued."""
    now = now or timezone.now()
    found = outbox.lost(channel, now=now, limit=limit)
    for model, pk in found.to_send:
        send.delay(channel.name, label(model), pk)
    if found.to_close:
        close.delay(channel.name, found.to_close)
    if found.to_rewrite:
        rewrite.delay(channel.name, found.to_rewrite)
    # Warned a stale time ago, so the signal had its chance.
    unwarned = outbox.unwarned(channel, now=now).filter(approval__warned_at__lt=now - timedelta(seconds=channel.stale_seconds()))
    approval_ids = set(unwarned.values_list("approval", flat=True)[:limit])
    for approval in Approval.objects.filter(pk__in=approval_ids):
        for model, pk in channel.queue_warnings(approval):
            send.delay(channel.name, label(model), pk)
    channel.sweep()


@shared_task(ignore_result=True)
def sweep() -> None:
    for channel in channels.registered():
        if channel.enabled():
            sweep_channel(channel)
