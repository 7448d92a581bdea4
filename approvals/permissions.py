"""Who may see and decide approvals: the conversation's owner, or an approver."""
from typing import Any

from django.contrib.auth.models import Group, Permission

DECIDE_PERMISSION = "approvals.decide_approval"
APPROVERS_GROUP = "Approvers"


def is_approver(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(DECIDE_PERMISSION))


def can_see(user: Any, approval: Any) -> bool:
    return bool(user and user.is_authenticated) and (approval.requested_by_id == user.pk or is_approver(user))


def can_decide(user: Any, approval: Any, *, approve: bool = True) -> bool:
    """The owner decides their own calls, unless the call needs an approver; then only an approver
    who is not the requester, nor the one who edited it, may approve it (four eyes: whoever writes
    an edit does not also check it). Saying no needs no second pair of eyes: the owner may always
    reject (or stop) a call of their own conversation."""
    if not can_see(user, approval):
        return False
    if approval.approver_required and approve:
        return is_approver(user) and user.pk not in (approval.requested_by_id, approval.edited_by_id)
    return True


def approvers_group():
    """The Approvers group with the decide permission (the data migration makes it; this keeps it)."""

    group, _ = Group.objects.get_or_create(name=APPROVERS_GROUP)
    group.permissions.add(Permission.objects.get(codename="decide_approval", content_type__app_label="approvals"))
    return group
