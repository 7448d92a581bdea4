"""Who may see and decide approvals: the conversation's owner, or an approver."""
from typing import Any

DECIDE_PERMISSION = "approvals.decide_approval"


def is_approver(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(DECIDE_PERMISSION))


def can_see(user: Any, approval: Any) -> bool:
    return bool(user and user.is_authenticated) and (approval.requested_by_id == user.pk or is_approver(user))


def can_decide(user: Any, approval: Any) -> bool:
    """The owner decides their own calls, unless the call needs an approver; then only an approver
    who is not the requester may (four eyes)."""
    if not can_see(user, approval):
        return False
    if approval.approver_required:
        return is_approver(user) and user.pk != approval.requested_by_id
    return True
