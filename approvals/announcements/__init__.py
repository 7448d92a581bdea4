"""How everything else hears of decisions without holding up the request that made them.

In the deciding transaction the webhook deliveries are written (an outbox). After the commit one
task, however many approvals the transaction decided, sends `approvals_decided` in a worker: the
dashboards' push, the webhooks' sends, Telegram's edits and the conversations' resumption all run
there, so a decision request answers after its commit and that one enqueue. If the enqueue fails
(Redis down at that moment) nothing is lost: the decisions are stored, the webhook sweep sends the
deliveries, the stalled-conversation sweep resumes each conversation whose turn is decided, and
Telegram's sweep closes its messages.


In this package: `webhooks` (who to tell, what to send, signed and delivered) and `outcomes`
(what became of an approval, in one line, for the surfaces outside the site). May import
approvals' models, signals and the pauses' and votes' wording; never approvals.services."""
from celery import shared_task
from django.db import transaction

from . import webhooks
from ..models import Approval, Webhook
from ..signals import approval_stored, approvals_decided


def announce_on_commit(approvals: list[Approval], *, in_worker: bool = True) -> None:
    """Called inside the deciding transaction. `in_worker=False` sends the signal right after the
    commit, in this process: for decisions made where a worker already is (a rule's, in the loop)."""
    deliveries = webhooks.create_deliveries(approvals, Webhook.Event.DECIDED)
    # Robust: the decisions are stored whatever their receivers meet (a broker that is down, say).
    if in_worker:
        approval_ids = [approval.pk for approval in approvals]
        if len(approvals) == 1:
            transaction.on_commit(lambda: approval_stored.send(sender=Approval, approval=approvals[0]), robust=True)
        transaction.on_commit(lambda: announce_decided.delay(approval_ids, deliveries), robust=True)
    else:
        transaction.on_commit(lambda: _send(approvals, deliveries), robust=True)


@shared_task(ignore_result=True)
def announce_decided(approval_ids: list[int], delivery_ids: list[int]) -> None:
    _send(list(Approval.objects.filter(pk__in=approval_ids).order_by("pk")), delivery_ids)


def _send(approvals: list[Approval], delivery_ids: list[int]) -> None:
    approvals_decided.send(sender=Approval, approvals=approvals, deliveries=delivery_ids)
