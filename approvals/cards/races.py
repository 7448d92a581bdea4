"""What a card says where a decision was pressed and lost the race: that it was not applied, and
who decided first, when and through what ("Your reject was not applied: bob approved it at 12:03:07
via api"). The card below it shows the decision that stands."""
from django.utils import timezone

from ..models import Approval

PRESSED = {"approve": "approve", "reject": "reject", "respond": "response", "answer": "answer", "decline": "decline", "claim": "claim", "extension": "extension", "edit": "edit"}
OUTCOMES = {
    Approval.Status.APPROVED: "approved", Approval.Status.REJECTED: "rejected", Approval.Status.ANSWERED: "answered",
    Approval.Status.DECLINED: "declined", Approval.Status.CANCELLED: "stopped",
}


def lost_race(approval: Approval, pressed: str) -> str:
    what = PRESSED.get(pressed, "decision")
    when = f" at {timezone.localtime(approval.decided_at):%H:%M:%S}" if approval.decided_at else ""
    if approval.status == Approval.Status.EXPIRED:
        return f"Your {what} was not applied: the call expired{when}."
    who = approval.decided_by.get_username() if approval.decided_by else "the system"
    if approval.responded:
        return f"Your {what} was not applied: {who} answered it instead{when} via {approval.decided_via}."
    return f"Your {what} was not applied: {who} {OUTCOMES.get(approval.status, approval.status)} it{when} via {approval.decided_via}."
