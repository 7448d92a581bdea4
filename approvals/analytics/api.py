"""Analytics in the JSON API: how approvals were decided over a window (approvals.analytics.selectors)."""
from datetime import date, datetime

from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError

from .selectors import DEFAULT_DAYS, MAX_DAYS, Breakdown, InvalidWindow, approval_analytics, parse_days
from ..permissions import is_approver

router = Router(tags=["analytics"])


class Figures(Schema):
    decisions: int = Field(description="People's approves and rejects (not rules', repeats' or expiries').")
    approved: int
    rejected: int
    approval_rate: float | None = Field(description="approved / decisions; null without decisions.")
    median_seconds: float | None = Field(description="Nearest-rank median of requested → decided, in seconds.")
    p95_seconds: float | None = Field(description="Nearest-rank 95th percentile of requested → decided, in seconds.")


class ApproverFigures(Figures):
    user: str
    rubber_stamp_reason: str = Field(description='Why this approver is a rubber-stamp suspect, in words; "" when not one.')


class AgentFigures(Figures):
    agent: str
    expired: int


class ToolFigures(Figures):
    tool: str
    expired: int


class DayOut(Schema):
    date: date
    pending: int = Field(description="Pending at the end of the day (now, for today).")
    decided: int = Field(description="Decisions made that day.")


class OversightOut(Schema):
    agent: str
    tool: str
    reviewer_approved: int = Field(description="Calls the AI reviewer approved (decided via reviewer).")
    reviewer_escalated: int = Field(description="Calls the reviewer handed to a person.")
    reviewer_wrong: int = Field(description="Of those it approved: later undone by a person, or denied by a later deny rule.")
    rules_decided: int = Field(description="Calls an allow or deny rule decided at once.")
    human_decisions: int = Field(description="People's approves and rejects.")
    human_seconds: float = Field(description="Their total time from the request to the decision, in seconds.")


class ShadowOut(Schema):
    rule: int
    tool: str
    effect: str
    would_allow: int
    would_deny: int
    would_ask: int
    changed: int = Field(description="Live calls it would have decided otherwise than they were.")


class AnalyticsOut(Schema):
    days: int
    since: datetime
    by_approver: list[ApproverFigures]
    by_agent: list[AgentFigures]
    by_tool: list[ToolFigures]
    expired: int
    escalated: int = Field(description="Approvals escalated in the window: 0 until escalation exists.")
    rubber_stamp_suspects: list[str] = Field(
        description="Approvers with at least 20 decisions and a median under 2 seconds, or at least 95 % approved "
        "and a median under 3 seconds (each one's rubber_stamp_reason says which)."
    )
    per_day: list[DayOut]
    oversight: list[OversightOut] = Field(description="Per agent and tool: who decided, the reviewer, rules or people.")
    shadow_rules: list[ShadowOut] = Field(description="Each shadow rule's counts over live calls since it was saved.")


def figures(row: Breakdown, key: str, *, expired: bool = True) -> dict:
    return {
        key: row.label, "decisions": row.decisions, "approved": row.approved, "rejected": row.rejected,
        "approval_rate": row.approval_rate, "median_seconds": row.median_seconds, "p95_seconds": row.p95_seconds,
        **({"expired": row.expired} if expired else {}),
    }


@router.get("/approvals", response=AnalyticsOut)
def approvals_analytics(
    request,
    days: str = Query(str(DEFAULT_DAYS), description=f"The last `days` days, today included: 1 to {MAX_DAYS}."),
):
    """Per approver, agent and tool: decisions, approval rate, nearest-rank median and p95 time to
    decide; expiries; rubber-stamp suspects; and per day, pending and decided. Approvers only (403)."""
    if not is_approver(request.user):
        raise HttpError(403, "Analytics are for approvers.")
    try:
        report = approval_analytics(days=parse_days(days))
    except InvalidWindow as exc:
        raise HttpError(400, str(exc)) from None
    return {
        "days": report.days,
        "since": report.since,
        "by_approver": [figures(row, "user", expired=False) | {"rubber_stamp_reason": row.rubber_stamp_reason} for row in report.by_approver],
        "by_agent": [figures(row, "agent") for row in report.by_agent],
        "by_tool": [figures(row, "tool") for row in report.by_tool],
        "expired": report.expired,
        "escalated": report.escalated,
        "rubber_stamp_suspects": [row.label for row in report.rubber_stamp_suspects],
        "per_day": report.per_day,
        "oversight": [vars(row) for row in report.oversight.rows],
        "shadow_rules": [vars(row) for row in report.oversight.shadow_rules],
    }
