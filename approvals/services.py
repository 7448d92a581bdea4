"""Writes on approvals: request one, decide one (first decision wins), decide several."""
import logging

from django.db import transaction
from django.utils import timezone

from .models import Approval
from .permissions import can_decide, can_see
from .signals import approval_decided

logger = logging.getLogger(__name__)


class DecisionError(Exception):
    pass


class AlreadyDecided(DecisionError):
    """Someone (or the timeout) decided first; the stored decision stands."""

    def __init__(self, approval: Approval):
        self.approval = approval
        super().__init__(f"Approval {approval.pk} was already {approval.status}.")


class NotAllowed(DecisionError):
    pass


def request_approval(
    *, tool_call_id: int, conversation_id, requested_by_id: int, reason: str, risk: str, arguments_hash: str
) -> Approval:
    return Approval.objects.create(
        tool_call_id=tool_call_id,
        conversation_id=conversation_id,
        requested_by_id=requested_by_id,
        reason=reason,
        risk=risk,
        arguments_hash=arguments_hash,
    )


def decide(approval_id: int, *, user, approve: bool, via: str, reason: str = "") -> Approval:
    """Record one decision. Raises Approval.DoesNotExist for an approval the user may not see."""
    approval = Approval.objects.get(pk=approval_id)
    if not can_see(user, approval):
        raise Approval.DoesNotExist
    if not can_decide(user, approval):
        raise NotAllowed("You may not decide this approval.")
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
        transaction.on_commit(lambda: approval_decided.send(sender=Approval, approval=approval))
    logger.info("approval %s %s by %s via %s", approval.pk, status, user, via)
    return approval


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
    decided = []
    for approval in pending.order_by("pk"):
        if not can_decide(user, approval):
            continue
        try:
            decided.append(decide(approval.pk, user=user, approve=approve, via=via, reason=reason))
        except AlreadyDecided:
            continue
    return decided
