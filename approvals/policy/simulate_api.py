"""POST /api/rules/simulate: what a rule would have done to its scope's recent calls, before it is
saved (approvals.policy.simulate). Who may simulate a rule is exactly who may make it (approvals.policy.rulemaking):
the same 400, 403 and 404. Nothing is created."""
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ninja import Field, Router, Schema

from . import simulate

router = Router(tags=["rules"])


class SimulateIn(Schema):
    effect: Literal["allow", "deny", "ask"]
    tool: str = Field(description="A tool's name, or a glob such as notes__*.")
    arguments: dict[str, Any] = Field(default_factory=dict)
    scope: Literal["conversation", "agent_user", "agent", "global"]
    conversation_id: UUID | None = None
    agent: str = ""
    expires_at: datetime | None = None
    max_uses: int | None = Field(None, ge=1, le=10**9)
    note: str = ""
    after: dict[str, Any] | None = None
    at_most: dict[str, Any] | None = None
    days: int = Field(simulate.DEFAULT_DAYS, ge=1, le=simulate.MAX_DAYS, description="How far back to replay.")


class SimulateOut(Schema):
    would_allow: int
    would_deny: int
    would_ask: int
    never: dict[str, int]
    samples: list[int]


@router.post("/simulate", response=SimulateOut)
def simulate_rule(request, payload: SimulateIn):
    """Replay the last `days` days (at most 10,000 calls, newest first) of the rule's scope through
    it: how many calls it would have allowed, denied and asked a human about, how many it never
    could decide and why, and a few sample ids (an approval's, or a call's if it had none)."""
    fields = payload.dict()
    days = fields.pop("days")
    return simulate.simulate_for(request.auth, days=days, **fields).as_contract()
