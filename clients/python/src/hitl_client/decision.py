"""`Decision`: an approval as the server holds it, read once from its JSON into typed fields."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import Cancelled, Expired, HitlError, NotApproved, Rejected, StillPending

PENDING = "pending"
APPROVED = "approved"


@dataclass(frozen=True)
class Decision:
    """One approval request and where it stands."""

    id: int
    status: str
    """`pending`, `approved`, `rejected`, `expired` or `cancelled`."""
    approved: bool
    tool: str
    """The tool's name, as requested (empty if the server left it out)."""
    arguments: dict[str, Any]
    """What to run: the approved arguments once approved (a human may have edited them), else the
    requested ones."""
    requested_arguments: dict[str, Any]
    decided_by: str | None
    decided_via: str
    """Who or what decided: `api`, `dashboard`, `telegram`, ..., `rule` or `policy` (no human needed)."""
    rejection_reason: str
    comment: str
    shown_hash: str
    """The version deciders see; an outcome is reported for the approved one."""
    conversation: str | None
    """The id of the conversation the request landed in (one per `thread`)."""
    raw: dict[str, Any] = field(repr=False, compare=False)
    """The approval object exactly as the server sent it."""

    @property
    def pending(self) -> bool:
        return self.status == PENDING

    @property
    def edited(self) -> bool:
        """Approved with other arguments than were requested."""
        return self.approved and self.arguments != self.requested_arguments

    @classmethod
    def from_json(cls, data: Any) -> Decision:
        """Read an approval object; anything that is not one is a HitlError, not a KeyError later."""
        try:
            requested = _object(data["arguments"])
            approved_arguments = data.get("approved_arguments")
            status = data["status"]
            if not isinstance(status, str):
                raise ValueError(f"status {status!r}")
            call = data.get("tool_call") or {}
            decision = cls(
                id=int(data["id"]),
                status=status,
                approved=status == APPROVED,
                tool=data.get("tool") or call.get("name") or "",
                arguments=requested if approved_arguments is None else _object(approved_arguments),
                requested_arguments=requested,
                decided_by=data.get("decided_by"),
                decided_via=data.get("decided_via") or "",
                rejection_reason=data.get("rejection_reason") or "",
                comment=data.get("comment") or "",
                shown_hash=data.get("shown_hash") or "",
                conversation=_conversation_id(data),
                raw=data,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise HitlError(None, f"Not an approval object ({error!r}): {str(data)[:200]}") from None
        return decision

    def raise_for_status(self) -> Decision:
        """Return this decision if approved; raise Rejected, Expired, Cancelled or StillPending if not."""
        if self.approved:
            return self
        raise _not_approved(self)


def _not_approved(decision: Decision) -> NotApproved:
    if decision.status == "rejected":
        return Rejected(decision)
    if decision.status == "expired":
        return Expired(decision)
    if decision.status == "cancelled":
        return Cancelled(decision)
    if decision.status == PENDING:
        return StillPending(decision)
    return NotApproved(decision, f"Approval {decision.id} is {decision.status}")


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"arguments {value!r} are not an object")
    return value


def _conversation_id(data: dict[str, Any]) -> str | None:
    conversation = data.get("conversation", data.get("conversation_id"))
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    return None if conversation is None else str(conversation)
