"""What every page shows an approver: how many approvals wait in their inbox (the nav's count)."""
from .inbox import pending_count
from .permissions import is_approver


def inbox_count(request) -> dict:
    """`inbox_count`: a callable the template calls once (one query), only for approvers."""
    user = getattr(request, "user", None)
    if not is_approver(user):
        return {}
    return {"inbox_count": lambda: pending_count(user)}
