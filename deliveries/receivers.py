"""The decision service's signals, heard once for every channel: each enabled channel gets the
same life (requests to who may decide, copies updated to the outcome, rewritten while they wait,
reminders, warnings before expiry). A channel changes a step by overriding its Channel method."""
from approvals import signals

from . import channels
from .tasks import close_later, rewrite_later, send_later


def _enabled():
    return [channel for channel in channels.registered() if channel.enabled()]


def on_approval_requested(sender, approval, **kwargs) -> None:
    for channel in _enabled():
        send_later(channel, channel.queue(approval))


def on_approvals_escalated(sender, approvals, **kwargs) -> None:
    # The escalation groups' members may decide it now: they get the request, as its approvers did.
    for approval in approvals:
        on_approval_requested(sender, approval)


def on_approvals_reminded(sender, approvals, **kwargs) -> None:
    for approval in approvals:
        on_approval_requested(sender, approval)  # linked since the request: they get the request itself
        for channel in _enabled():
            send_later(channel, channel.queue_reminders(approval))


def on_approvals_decided(sender, approvals, **kwargs) -> None:
    for channel in _enabled():
        close_later(channel, channel.open_ids(approvals))


def on_approval_edited(sender, approval, **kwargs) -> None:
    # Every copy shows the edit (with buttons for it, or a new message where a copy cannot change),
    # and a stricter edit's new deciders get it now.
    for channel in _enabled():
        if channel.rewrites_in_place:
            rewrite_later(channel, list(channel.sent(approval).values_list("pk", flat=True)))
        else:
            send_later(channel, channel.requeue_edited(approval))
    on_approval_requested(sender, approval)


def on_approval_voted(sender, approval, **kwargs) -> None:
    # Still pending: every copy counts the votes now, its buttons kept for the others.
    for channel in _enabled():
        if channel.rewrites_in_place:
            rewrite_later(channel, list(channel.sent(approval).values_list("pk", flat=True)))


def on_approvals_expiring(sender, approvals, **kwargs) -> None:
    for approval in approvals:
        for channel in _enabled():
            send_later(channel, channel.queue_warnings(approval))


def on_approval_extended(sender, approval, **kwargs) -> None:
    # Every copy shows the new deadline (the new deadline gets a warning of its own).
    for channel in _enabled():
        channel.extended(approval)


def connect() -> None:
    for signal, receiver in [
        (signals.approval_requested, on_approval_requested),
        (signals.approvals_escalated, on_approvals_escalated),
        (signals.approvals_reminded, on_approvals_reminded),
        (signals.approvals_decided, on_approvals_decided),
        (signals.approval_edited, on_approval_edited),
        (signals.approval_voted, on_approval_voted),
        (signals.approvals_expiring, on_approvals_expiring),
        (signals.approval_extended, on_approval_extended),
    ]:
        signal.connect(receiver, dispatch_uid=f"deliveries.{receiver.__name__}")
