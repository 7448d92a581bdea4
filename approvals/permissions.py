"""Who may see and decide approvals: the conversation's owner, an approver, or (for a routed call)
the route's groups; the rules themselves are in approvals.deciders.routing."""
from typing import Any

from django.contrib.auth.models import Group, Permission

from .deciders import routing
from .deciders.routing import Powers

DECIDE_PERMISSION = routing.DECIDE_PERMISSION
APPROVERS_GROUP = "Approvers"
ROUTE_PERMISSION = "approvals.manage_route"


def is_approver(user: Any) -> bool:
    """A global approver: sees every call and decides every unrouted one that needs an approver."""
    return routing.is_global_approver(user)


def may_approve_anything(user: Any, powers: Powers | None = None) -> bool:
    """Whether the inbox, history and analytics are theirs: a global approver, a member of a route's
    groups, or a delegate of either."""
    return bool(user and user.is_authenticated) and (is_approver(user) or routing.powers_of(user, powers).may_decide_anything())


def may_manage_routes(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(ROUTE_PERMISSION)) and not routing.asks_only(user)


def can_see(user: Any, approval: Any, powers: Powers | None = None) -> bool:
    return routing.can_see(user, approval, powers)


def can_decide(user: Any, approval: Any, *, approve: bool = True, powers: Powers | None = None) -> bool:
    """The owner decides their own calls, unless the call needs an approver; then only an approver
    who is not the requester, nor the one who edited it, may approve it (four eyes: whoever writes
    an edit does not also check it). A routed call is decided by its route's groups. Saying no
    needs no second pair of eyes: the owner may always reject (or stop) a call of their own
    conversation."""
    return routing.acting_as(user, approval, approve=approve, powers=powers) is not None


def approvers_group():
    """The Approvers group with the decide permission (the data migration makes it; this keeps it)."""

    group, _ = Group.objects.get_or_create(name=APPROVERS_GROUP)
    group.permissions.add(Permission.objects.get(codename="decide_approval", content_type__app_label="approvals"))
    return group
