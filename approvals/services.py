"""Writes on approvals: request one, decide one (first decision wins), decide several."""
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from .models import Approval
from .permissions import can_decide, can_see
from .signals import approval_requested, approvals_decided

logger = logging.getLogger(__name__)


class DecisionError(Exception):
    pass


class AlreadyDecided(DecisionError):
    """Someone (or the timeout) decided first; the stored decision stands."""

    def __init__(self, approval: Approval):
        self.approval = approval
        super().__init__(f"Approval {approval.pk} was already {approval.status}.")


class NotAllowed(DecisionError):
    """The user may see the approval but not decide it (four eyes: an approver must)."""


def request_approval(
    *,
    tool_call_id: int,
    conversation_id,
    requested_by_id: int,
    reason: str,
    risk: str,
    arguments_hash: str,
    approver_required: bool = False,
    timeout_seconds: int | None = None,
) -> Approval:
    now = timezone.now()
    approval = Approval.objects.create(
        requested_at=now,
        tool_call_id=tool_call_id,
        conversation_id=conversation_id,
        requested_by_id=requested_by_id,
        reason=reason,
        risk=risk,
        arguments_hash=arguments_hash,
        approver_required=approver_required,
        expires_at=now + timedelta(seconds=timeout_seconds) if timeout_seconds else None,
    )
    transaction.on_commit(lambda: approval_requested.send(sender=Approval, approval=approval), robust=True)
    return approval


def decide(approval_id: int, *, user, approve: bool, via: str, reason: str = "") -> Approval:
    """Record one decision. Raises Approval.DoesNotExist for an approval the user may not see."""
    approval = Approval.objects.get(pk=approval_id)
    if not can_see(user, approval):
        raise Approval.DoesNotExist
    if not can_decide(user, approval):
        raise NotAllowed("This call needs an approver other than the requester (four eyes).")
    status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
    with transaction.atomic():
        # The conditional update is the whole race: of two deciders (or a decider and the expiry)
        # exactly one matches `pending`; the other updates 0 rows and is told who got there first.
        updated = Approval.objects.filter(pk=approval_id, status=Approval.Status.PENDING).update(
            status=status,
            decided_at=timezone.now(),
            decided_by=user,
            decided_via=via,
            rejection_reason="" if approve else reason.strip(),
        )
        approval.refresh_from_db()
        if not updated:
            raise AlreadyDecided(approval)
        # Robust: the decision is stored whatever its receivers meet (a broker that is down, say).
        _announce_on_commit([approval])
    logger.info("approval %s %s by %s via %s", approval.pk, status, user, via)
    return approval


def _announce_on_commit(approvals: list[Approval]) -> None:
    # Robust: the decisions are stored whatever their receivers meet (a broker that is down, say).
    transaction.on_commit(lambda: approvals_decided.send(sender=Approval, approvals=approvals), robust=True)


def expire_overdue(*, now=None, limit: int = 500) -> list[int]:
    """Expire pending approvals past their deadline: decided by nobody, via `timeout`. A decision
    racing the expiry meets the same conditional update, so exactly one of them wins."""
    now = now or timezone.now()
    overdue = Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=now)
    expired = []
    for approval_id in overdue.order_by("expires_at").values_list("pk", flat=True)[:limit]:
        with transaction.atomic():
            if not Approval.objects.filter(pk=approval_id, status=Approval.Status.PENDING).update(
                status=Approval.Status.EXPIRED, decided_at=now, decided_via=Approval.Via.TIMEOUT
            ):
                continue  # decided a moment ago
            _announce_on_commit([Approval.objects.get(pk=approval_id)])
        expired.append(approval_id)
    if expired:
        logger.info("expired approvals %s", expired)
    return expired


@dataclass
class Outcome:
    """What deciding several approvals did: each id lands in exactly one list."""

    decided: list[Approval] = field(default_factory=list)
    already_decided: list[int] = field(default_factory=list)
    not_allowed: list[int] = field(default_factory=list)
    not_found: list[int] = field(default_factory=list)  # unknown, or hidden from the user


def decide_many(approval_ids: list[int], *, user, approve: bool, via: str, reason: str = "") -> Outcome:
    """Decide each approval in `approval_ids` that `user` may decide, with the same rules as
    decide(), in one transaction and a number of queries that does not grow with the ids."""
    outcome = Outcome()
    ids = sorted(set(approval_ids))
    approvals = {a.pk: a for a in Approval.objects.filter(pk__in=ids)}
    allowed = []
    for approval_id in ids:
        approval = approvals.get(approval_id)
        if approval is None or not can_see(user, approval):
            outcome.not_found.append(approval_id)
        elif not can_decide(user, approval):
            outcome.not_allowed.append(approval_id)
        elif approval.status != Approval.Status.PENDING:
            outcome.already_decided.append(approval_id)
        else:
            allowed.append(approval_id)
    if not allowed:
        return outcome
    status = Approval.Status.APPROVED if approve else Approval.Status.REJECTED
    with transaction.atomic():
        # Lock what is still pending, then decide exactly those rows. On PostgreSQL a row another
        # decider holds is waited for and its status checked again, so it drops out once decided;
        # SQLite's IMMEDIATE transaction holds the one write lock from the start. Either way the
        # first decision wins, as with decide()'s conditional update.
        pending = list(
            Approval.objects.select_for_update().filter(pk__in=allowed, status=Approval.Status.PENDING).order_by("pk")
        )
        decision = {
            "status": status,
            "decided_at": timezone.now(),
            "decided_by": user,
            "decided_via": via,
            "rejection_reason": "" if approve else reason.strip(),
        }
        Approval.objects.filter(pk__in=[a.pk for a in pending]).update(**decision)
        for approval in pending:
            for name, value in decision.items():
                setattr(approval, name, value)
        if pending:
            _announce_on_commit(pending)
    decided_ids = {a.pk for a in pending}
    outcome.decided = pending
    outcome.already_decided = sorted(outcome.already_decided + [i for i in allowed if i not in decided_ids])
    for approval in pending:
        logger.info("approval %s %s by %s via %s", approval.pk, status, user, via)
    return outcome


def decide_all(
    *,
    conversation_id,
    user,
    via: str,
    approve: bool = True,
    reason: str = "",
    approval_ids: list[int] | None = None,
) -> list[Approval]:
    """Decide every pending approval of a conversation that `user` may decide, or only `approval_ids`.

    An explicit id list is what the user saw: a call that became pending later is left alone.
    """
    pending = Approval.objects.filter(conversation_id=conversation_id, status=Approval.Status.PENDING)
    if approval_ids is not None:
        pending = pending.filter(pk__in=approval_ids)
    ids = [a.pk for a in pending if can_decide(user, a)]
    return decide_many(ids, user=user, approve=approve, via=via, reason=reason).decided
