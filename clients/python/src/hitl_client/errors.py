"""What the client raises: `HitlError` when the server refuses or cannot be reached, and the
`NotApproved` family when a call may not run (rejected, expired, cancelled, or still pending)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .decision import Decision


class HitlError(Exception):
    """The API answered with an error (`status_code`, the server's `detail`, and for a 400 the
    `field` to fix), or could not be reached at all (`status_code` None: see `Unreachable`)."""

    def __init__(self, status_code: int | None, detail: Any, field: str | None = None):
        self.status_code = status_code
        self.detail = detail
        self.field = field
        super().__init__(f"{status_code}: {detail}" if status_code is not None else str(detail))


class Unreachable(HitlError):
    """The server could not be reached, and retrying (bounded, with backoff) did not help."""

    def __init__(self, detail: str):
        super().__init__(None, detail)


class NotApproved(Exception):
    """The call may not run. `decision` is the approval as the server holds it."""

    def __init__(self, decision: Decision, message: str):
        self.decision = decision
        super().__init__(message)


class Rejected(NotApproved):
    """A human (or a deny rule) rejected the call: `reason` says why, `decided_by` who."""

    def __init__(self, decision: Decision):
        self.reason = decision.rejection_reason
        self.decided_by = decision.decided_by
        who = decision.decided_by or f"a {decision.decided_via} decision"
        super().__init__(decision, f"Rejected by {who}" + (f": {self.reason}" if self.reason else ""))


class Expired(NotApproved):
    """Nobody decided before the agent's approval timeout."""

    def __init__(self, decision: Decision):
        super().__init__(decision, f"Approval {decision.id} expired before anyone decided it")


class Cancelled(NotApproved):
    """The request was withdrawn on the server (its conversation stopped) before a decision."""

    def __init__(self, decision: Decision):
        super().__init__(decision, f"Approval {decision.id} was cancelled")


class StillPending(NotApproved):
    """The wait ended (your `timeout`) before anyone decided: the approval still waits on the server,
    and `client.wait(decision)` can pick it up again."""

    def __init__(self, decision: Decision):
        super().__init__(decision, f"Approval {decision.id} is still pending")
