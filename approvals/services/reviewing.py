"""The AI reviewer's two outcomes (approvals.reviewer): it approves a call it may decide, as its own
actor (decided via reviewer, by nobody, its model and rationale in the audit chain), or it hands the
call to a person, who is only then asked (approval_requested), with its rationale on the card."""
import logging

from django.db import transaction
from django.utils import timezone

from ..models import Approval
from ..signals import approval_requested, approval_reviewed
from .deciding import _decision, _store_decision

logger = logging.getLogger(__name__)

REVIEWING, ESCALATED, DECIDED = "reviewing", "escalated", "decided"  # approvals.reviewer's states


def decide_by_reviewer(approval: Approval, *, model: str, rationale: str) -> Approval:
    """Approve a call its reviewer approved, if it still waits for the reviewer, before the review's
    deadline, as the reviewer read it (the conditional update: a person's decision, an edit or the
    sweep's escalation wins over it). Raises AlreadyDecided or ArgumentsChanged, as decide() does."""
    decision = _decision(Approval.Status.APPROVED, None, Approval.Via.REVIEWER) | {
        "review_state": DECIDED, "review_until": None, "reviewer_model": model[:200], "reviewer_rationale": rationale,
    }
    return _store_decision(
        approval, decision, user=None, via=Approval.Via.REVIEWER, announce_here=True,
        only_if={"review_state": REVIEWING, "review_until__gt": timezone.now()},
    )


def escalate_review(approval: Approval, rationale: str, *, model: str = "") -> bool:
    """Ask a person about a call its reviewer did not approve (it doubted, failed, was late or may
    not decide it now), saying why; the call is requested now, as any call is: channels, inboxes and
    webhooks hear of it. False if it no longer waited for the reviewer."""
    rationale = rationale.strip()[:1000] or "the reviewer gave no reason"
    changes = {"review_state": ESCALATED, "review_until": None, "reviewer_rationale": rationale}
    if model:
        changes["reviewer_model"] = model[:200]
    with transaction.atomic():
        if not Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING, review_state=REVIEWING).update(**changes):
            return False
        for name, value in changes.items():
            setattr(approval, name, value)
        transaction.on_commit(lambda: approval_requested.send(sender=Approval, approval=approval), robust=True)
        transaction.on_commit(lambda: approval_reviewed.send(sender=Approval, approval=approval), robust=True)
    logger.info("approval %s: escalated by its reviewer: %s", approval.pk, rationale)
    return True
