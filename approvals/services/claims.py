"""Claims: "I'm on it" on a pending approval, a signal to the other approvers, never a lock."""
import logging

from django.db import transaction
from django.utils import timezone

from ..deciders import routing
from ..models import Approval
from ..permissions import can_decide, can_see
from ..signals import approval_claimed
from .deciding import _refuse_if_settled
from .errors import AlreadyDecided, NotAllowed

logger = logging.getLogger(__name__)


def claim(approval_id: int, *, user) -> Approval:
    """Say "I'm on it" on a pending approval: a signal to the other approvers, not a lock. Whoever may
    decide it still may, and a claim by someone else replaces this one. It ends with the decision
    (every deciding update clears it) or on unclaim(). Not in the audit chain: it decides nothing.
    Raises Approval.DoesNotExist (not theirs to see), NotAllowed or AlreadyDecided."""
    return _set_claim(approval_id, user=user, claimed_by=user)


def unclaim(approval_id: int, *, user) -> Approval:
    """End the claim on a pending approval, whoever made it: anyone who may decide it may clear a
    claim (a colleague's left behind, too), as anyone may replace one. Raises as claim() does."""
    return _set_claim(approval_id, user=user, claimed_by=None)


def _set_claim(approval_id: int, *, user, claimed_by) -> Approval:
    approval = Approval.objects.filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    if not can_decide(user, approval):
        raise NotAllowed(routing.ASKING_TOKEN if routing.asks_only(user) else "Only someone who may decide this call may claim it.")
    _refuse_if_settled(approval)
    claim_ = {"claimed_by": claimed_by, "claimed_at": timezone.now() if claimed_by else None}
    # Conditional on pending: a decision that lands first wins, and its update cleared the claim.
    if not Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(**claim_):
        approval.refresh_from_db()
        raise AlreadyDecided(approval)
    for name, value in claim_.items():
        setattr(approval, name, value)
    transaction.on_commit(lambda: approval_claimed.send(sender=Approval, approval=approval), robust=True)
    logger.info("approval %s %s by %s", approval.pk, "claimed" if claimed_by else "unclaimed", user)
    return approval
