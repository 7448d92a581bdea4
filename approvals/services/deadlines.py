"""Deadlines: the warning before one, the expiry at it (decided by nobody, via `timeout`), pushing
one back once, and asking an expired approval again."""
import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ..deciders import routing
from ..models import Approval
from ..permissions import can_see
from ..signals import approval_extended, approvals_expiring
from .deciding import _expire, _refuse_if_settled
from .errors import AlreadyDecided, NotAllowed, NotExpired, NotExtendable

logger = logging.getLogger(__name__)


def warning_at(start, timeout_seconds: int | None):
    """When a deadline `timeout_seconds` after `start` is warned of: at HITL_EXPIRY_WARNING_AT of
    the wait (80 %), and at least a minute before it (at once, for a wait shorter than a minute)."""
    if not timeout_seconds:
        return None
    fraction = start + timedelta(seconds=timeout_seconds * settings.HITL_EXPIRY_WARNING_AT)
    return max(start, min(fraction, start + timedelta(seconds=timeout_seconds - 60)))


def expire_overdue(*, now=None, limit: int = 500) -> list[int]:
    """Decide pending approvals past their deadline as each one's timeout action says (expire, reject
    or approve: deciding.timed_out), by nobody, via `timeout`. A decision
    racing the expiry meets the same conditional update, so exactly one of them wins."""
    now = now or timezone.now()
    overdue = Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=now).select_related("tool_call", "conversation__agent")
    expired = []
    for approval in overdue.order_by("expires_at")[:limit]:
        with transaction.atomic():
            if not _expire(approval, now, announce_here=True):
                continue  # decided a moment ago (or edited: then it expires at the next sweep)
        expired.append(approval.pk)
    if expired:
        logger.info("expired approvals %s", expired)
    return expired


def extend(approval_id: int, *, user, via: str, seconds: int | None = None) -> Approval:
    """Push a pending approval's deadline back, once, by `seconds` (by default, and at most, its
    agent's timeout), for its requester or someone who may approve it. The new deadline gets its own
    warning. Raises Approval.DoesNotExist (not theirs to see), NotAllowed, AlreadyDecided (an
    expired one: ask again instead) or NotExtendable."""
    approval = _requesters_or_deciders(approval_id, user, "extend its deadline")
    if routing.asks_only(user):
        raise NotAllowed(routing.ASKING_TOKEN)  # a deadline held open is a decision deferred: a person's to make
    _refuse_if_settled(approval)
    if approval.expires_at is None:
        raise NotExtendable("This approval has no deadline to extend.")
    if approval.extended_at is not None:
        raise NotExtendable(f"This approval's deadline was already extended once, by {approval.extended_by}.")
    most = approval.conversation.agent.approval_timeout_seconds or int((approval.expires_at - approval.requested_at).total_seconds())
    by = most if seconds is None else min(max(int(seconds), 1), most)
    now = timezone.now()
    deadline = approval.expires_at + timedelta(seconds=by)
    extended = Approval.objects.filter(
        pk=approval.pk, status=Approval.Status.PENDING, extended_at__isnull=True, expires_at=approval.expires_at, expires_at__gt=now
    ).update(
        expires_at=deadline, extended_at=now, extended_by=user, warned_at=None,
        warn_at=warning_at(now, int((deadline - now).total_seconds())),
    )
    approval.refresh_from_db()
    if not extended:
        _refuse_if_settled(approval)
        raise NotExtendable("This approval's deadline was already extended once.")
    logger.info("approval %s: deadline extended by %s s to %s by %s via %s", approval.pk, by, deadline.isoformat(), user, via)
    transaction.on_commit(lambda: approval_extended.send(sender=Approval, approval=approval), robust=True)
    return approval


def _requesters_or_deciders(approval_id: int, user, doing: str) -> Approval:
    """The approval, for its requester or someone who may approve it (what extend and ask_again
    allow). Raises Approval.DoesNotExist (not theirs to see) or NotAllowed."""
    approval = Approval.objects.select_related("tool_call", "conversation__agent", "route").filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    if approval.requested_by_id != user.pk and routing.acting_as(user, approval, approve=True) is None:
        raise NotAllowed(f"Only its requester or someone who may approve it can {doing}.")
    return approval


def warn_expiring(*, now=None, limit: int = 500) -> list[int]:
    """Mark pending approvals whose warning is due (warn_at passed, deadline not yet) as warned,
    each by a conditional update on the warning it was read with, and send approvals_expiring once
    with them after the commit: two sweeps, or a sweep restarted midway, never warn twice, and an
    extend that moved the warning meanwhile wins (its own warning comes later)."""
    now = now or timezone.now()
    due = Approval.objects.filter(
        status=Approval.Status.PENDING, warned_at__isnull=True, warn_at__lte=now, expires_at__gt=now
    ).select_related("tool_call", "conversation__agent", "requested_by", "extended_by")
    warned = []
    with transaction.atomic():
        for approval in due.order_by("warn_at")[:limit]:
            if Approval.objects.filter(
                pk=approval.pk, status=Approval.Status.PENDING, warned_at__isnull=True, warn_at=approval.warn_at, expires_at=approval.expires_at
            ).update(warned_at=now):
                approval.warned_at = now
                warned.append(approval)
        if warned:
            transaction.on_commit(lambda: _tell_expiring(warned))
    if warned:
        logger.info("warned that approvals %s expire soon", [a.pk for a in warned])
    return [a.pk for a in warned]


def _tell_expiring(warned: list[Approval]) -> None:
    """Every channel hears of the warnings, whichever of them fails (each one's sweep catches up)."""
    for receiver, error in approvals_expiring.send_robust(sender=Approval, approvals=warned):
        if isinstance(error, Exception):
            logger.error("approvals_expiring: %s failed for %s: %r", receiver, [a.pk for a in warned], error, exc_info=error)


# Makes the new call and approval that ask an expired approval again: chat registers it (chat.apps),
# since the call lives in a conversation, and approvals never imports chat (as approvals.policy.calls' checker).
AskAgain = Callable[..., Approval]


_asker: AskAgain | None = None


def register_asker(asker: AskAgain) -> None:
    global _asker
    _asker = asker


def ask_again(approval_id: int, *, user, via: str) -> Approval:
    """Ask an expired approval again, for its requester or someone who may approve it: a new pending
    approval for the same call and version (`asked_again_from` the old one), without asking the model
    again; once decided, the call runs (or its rejection is reported) as any call does. An approval
    past its deadline that the sweep has not reached yet expires now. Raises Approval.DoesNotExist,
    NotAllowed, NotExpired or CannotAskAgain."""
    approval = _requesters_or_deciders(approval_id, user, "ask it again")
    try:
        _refuse_if_settled(approval)  # one past its deadline expires now, whether or not the sweep ran
    except AlreadyDecided:
        pass  # settled: expired (asked again below) or decided (refused below)
    if approval.status != Approval.Status.EXPIRED:
        raise NotExpired(f"Approval {approval.pk} is {approval.status}: only an expired approval is asked again.")
    if _asker is None:
        raise RuntimeError("Nothing asks approvals again (the chat app registers it in ready()).")
    asked = _asker(approval, user=user)
    logger.info("approval %s asked again as %s by %s via %s", approval.pk, asked.pk, user, via)
    return asked
