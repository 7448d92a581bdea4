"""approvals' own reactions to its events: tell the dashboards, and send the webhooks."""
from core import live
from hitl.celery import enqueue_on_commit

from .announcements import webhooks
from .cards.fragments import claim_html, dashboard_signal_html, votes_html
from .models import Approval, Webhook
from .tasks import deliver_webhook


def on_approval_requested(sender, approval, **kwargs) -> None:
    _tell_dashboards(1, Webhook.Event.REQUESTED)
    for delivery_id in webhooks.create_deliveries([approval], Webhook.Event.REQUESTED):
        enqueue_on_commit(deliver_webhook, delivery_id)


def on_approvals_decided(sender, approvals, deliveries=(), **kwargs) -> None:
    # `deliveries`: the outbox the deciding transaction wrote (approvals.announcements); a send
    # lost here is resent by the webhook sweep.
    # Which ones: an open inbox takes their rows out in place, with no re-read of its list.
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html(Webhook.Event.DECIDED, len(approvals), [a.pk for a in approvals]))
    for delivery_id in deliveries:
        enqueue_on_commit(deliver_webhook, delivery_id)


def on_approval_edited(sender, approval, **kwargs) -> None:
    # The dashboards re-read the row; webhooks hear of the approval again when it is decided.
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html("approval.edited"))


def on_approval_claimed(sender, approval, **kwargs) -> None:
    # Open inboxes re-read their rows (each as its viewer sees them); open conversations get the
    # card's claim line, which reads the same for everyone.
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html("approval.claimed"))
    live.push_now(live.conversation_group(approval.conversation_id), claim_html(approval, can_decide=None, oob=True))


def on_approval_voted(sender, approval, vote=None, deliveries=(), **kwargs) -> None:
    # Still pending: open inboxes re-read their rows; the webhooks hear of the vote; open
    # conversations get the card's votes line ("1 of 2 approvals: bob"), the same for everyone.
    _tell_dashboards(1, Webhook.Event.VOTED)
    for delivery_id in deliveries:
        enqueue_on_commit(deliver_webhook, delivery_id)
    _push_votes([approval])


def on_approvals_reminded(sender, approvals, deliveries=(), **kwargs) -> None:
    _tell_dashboards(len(approvals), Webhook.Event.REMINDER)
    for delivery_id in deliveries:
        enqueue_on_commit(deliver_webhook, delivery_id)


def on_approvals_escalated(sender, approvals, deliveries=(), **kwargs) -> None:
    _tell_dashboards(len(approvals), Webhook.Event.ESCALATED)
    for delivery_id in deliveries:
        enqueue_on_commit(deliver_webhook, delivery_id)
    _push_votes(approvals)


def _push_votes(approvals) -> None:
    """Each card's votes line, as stored now (the votes read fresh), to its conversation."""
    fresh = Approval.objects.filter(pk__in=[approval.pk for approval in approvals]).prefetch_related("votes__user", "votes__on_behalf_of")
    for approval in fresh:
        live.push_now(live.conversation_group(approval.conversation_id), votes_html(approval, oob=True))


def _tell_dashboards(count: int, event: str) -> None:
    # One signal however many were decided: each open dashboard re-reads its list once.
    live.push_now(live.APPROVALS_GROUP, dashboard_signal_html(event, count))
