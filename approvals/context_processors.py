"""What every page shows an approver: whether the approvers' pages are theirs (the nav's links) and
how many approvals wait in their inbox (the nav's count)."""
from .inbox import pending_count
from .permissions import may_approve_anything
from .selectors import powers_for


def inbox_count(request) -> dict:
    """`inbox_count`: a callable the template calls once (one query), only for approvers of any kind
    (global, a route's group, a delegate), who also get `approves`. Asked only of a signed-in user."""
    user = getattr(request, "user", None)
    if not (user and user.is_authenticated):
        return {}
    powers = powers_for(request)
    if not may_approve_anything(user, powers):
        return {}
    return {"approves": True, "inbox_count": lambda: pending_count(user, powers)}
