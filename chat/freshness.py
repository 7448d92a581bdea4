"""An approval is for now, not for whenever a worker gets to it: an approved call that has not started
within its agent's `approval_valid_seconds` of the approval (workers down, a queue backed up) is not
run. It lapses, and the model reads why (lapsed_result); asked again, it needs a new approval."""
from datetime import timedelta

from django.utils import timezone


def lapsed_result(approval, agent, *, now=None) -> str:
    """What the model reads of a call whose approval is too old to run on, or "" while it is fresh
    (or the agent lets approvals stand forever, or the call had no approval: an ungated call)."""
    valid = agent.approval_valid_seconds
    if approval is None or valid is None or approval.decided_at is None:
        return ""
    if (now or timezone.now()) <= approval.decided_at + timedelta(seconds=valid):
        return ""
    return (
        f"Not run: the approval lapsed before it could run (approved at {approval.decided_at:%H:%M} UTC, "
        f"valid for {valid} s). Ask again if it should still be done."
    )
