"""Who decided the gated calls of a window, per agent and tool: the AI reviewer (approved, escalated,
and got wrong), rules, and people (how many, and the time they took); and what the shadow rules
would have changed. The measure of "fewer questions, never less safe" (issue 40, item 5).

Definitions, beside those of approvals.analytics.selectors (same window, same "decision"):

- *Reviewer approved*: decided via reviewer in the window. *Escalated*: a call its reviewer handed
  to a person (review state escalated), requested in the window.
- *Got wrong*: a reviewer-approved call that a person later undid (an undo asked, approved or run:
  chat.undo), or that a deny rule made after it would deny (the same tool and conditions, in its scope).
- *Rules decided*: decided via rule (allow or deny) in the window.
- *Human seconds*: the sum, over people's decisions, of requested → decided: how long calls waited
  for people, the time their questions cost."""
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import Count, Exists, OuterRef, Q, Sum

from ..models import Approval, Rule
from ..policy.rules import Call, matches
from .selectors import HUMAN_DECISION, SecondsBetween

MAX_CHECKED = 5000  # reviewer approvals checked for "got wrong" in one window (the newest)


@dataclass
class Oversight:
    """One agent and tool in the window."""

    agent: str
    tool: str
    reviewer_approved: int = 0
    reviewer_escalated: int = 0
    reviewer_wrong: int = 0
    rules_decided: int = 0
    human_decisions: int = 0
    human_seconds: float = 0.0


@dataclass(frozen=True)
class ShadowCounts:
    rule: int
    tool: str
    effect: str
    would_allow: int
    would_deny: int
    would_ask: int
    changed: int


@dataclass
class Report:
    rows: list[Oversight] = field(default_factory=list)
    shadow_rules: list[ShadowCounts] = field(default_factory=list)


def oversight(since, now) -> Report:
    """Four queries whatever the window: the counts per agent and tool, the reviewer approvals to
    check, the deny rules made since, and the shadow rules' counts."""
    window = Q(decided_at__gte=since, decided_at__lte=now)
    grouped = (
        Approval.objects.filter(window | Q(requested_at__gte=since, requested_at__lte=now, review_state="escalated"))
        .values("conversation__agent__slug", "tool_call__name").order_by()
        .annotate(
            reviewer_approved=Count("pk", filter=window & Q(decided_via=Approval.Via.REVIEWER)),
            reviewer_escalated=Count("pk", filter=Q(requested_at__gte=since, requested_at__lte=now, review_state="escalated")),
            rules_decided=Count("pk", filter=window & Q(decided_via=Approval.Via.RULE)),
            human_decisions=Count("pk", filter=window & HUMAN_DECISION),
            human_seconds=Sum(SecondsBetween("decided_at", "requested_at"), filter=window & HUMAN_DECISION),
        )
    )
    rows = {
        (row["conversation__agent__slug"], row["tool_call__name"]): Oversight(
            agent=row["conversation__agent__slug"], tool=row["tool_call__name"], reviewer_approved=row["reviewer_approved"],
            reviewer_escalated=row["reviewer_escalated"], rules_decided=row["rules_decided"],
            human_decisions=row["human_decisions"], human_seconds=round(float(row["human_seconds"] or 0), 3),
        )
        for row in grouped
    }
    for key, count in _wrong(since, now).items():
        rows[key].reviewer_wrong = count
    ordered = sorted(rows.values(), key=lambda row: (-(row.human_decisions + row.reviewer_approved + row.rules_decided), row.agent, row.tool))
    return Report([row for row in ordered if row.human_decisions or row.reviewer_approved or row.reviewer_escalated or row.rules_decided], _shadows())


def _wrong(since, now) -> dict:
    """Per (agent, tool): the reviewer's approvals a person later undid, or a later deny rule would deny."""
    ToolCall = Approval.tool_call.field.related_model  # approvals never imports chat
    undone = ToolCall.objects.filter(undo_of=OuterRef("tool_call_id")).exclude(status__in=["rejected", "cancelled", "expired", "lapsed"])
    approved = list(
        Approval.objects.filter(decided_at__gte=since, decided_at__lte=now, decided_via=Approval.Via.REVIEWER)
        .annotate(undone=Exists(undone))
        .values("conversation_id", "conversation__agent_id", "conversation__agent__slug", "conversation__owner_id",
                "tool_call__name", "tool_call__arguments", "decided_at", "undone")
        .order_by("-pk")[:MAX_CHECKED]
    )
    denies = list(Rule.objects.filter(effect=Rule.Effect.DENY, deleted_at__isnull=True, created_at__gte=since)) if approved else []
    wrong: dict = defaultdict(int)
    for row in approved:
        if row["undone"] or any(_denies_later(rule, row) for rule in denies):
            wrong[(row["conversation__agent__slug"], row["tool_call__name"])] += 1
    return wrong


def _denies_later(rule: Rule, row: dict) -> bool:
    if rule.created_at <= row["decided_at"]:
        return False
    in_scope = (
        rule.scope == Rule.Scope.GLOBAL
        or rule.scope == Rule.Scope.AGENT and rule.agent_id == row["conversation__agent_id"]
        or rule.scope == Rule.Scope.AGENT_USER and rule.agent_id == row["conversation__agent_id"] and rule.created_by_id == row["conversation__owner_id"]
        or rule.scope == Rule.Scope.CONVERSATION and rule.conversation_id == row["conversation_id"]
    )
    arguments = row["tool_call__arguments"] if isinstance(row["tool_call__arguments"], dict) else {}
    return in_scope and matches(rule, Call(tool=row["tool_call__name"], arguments=arguments, risk="low", approver_required=False))


def _shadows() -> list[ShadowCounts]:
    """Every standing shadow rule's counts since it was saved."""
    shadows = (
        Rule.objects.filter(mode=Rule.Mode.SHADOW, deleted_at__isnull=True).order_by("pk")
        .annotate(
            would_allow=Count("shadow_verdicts", filter=Q(shadow_verdicts__outcome="allow")),
            would_deny=Count("shadow_verdicts", filter=Q(shadow_verdicts__outcome="deny")),
            would_ask=Count("shadow_verdicts", filter=Q(shadow_verdicts__outcome="ask")),
            changed=Count("shadow_verdicts", filter=Q(shadow_verdicts__changed=True)),
        )
        .values("pk", "tool", "effect", "would_allow", "would_deny", "would_ask", "changed")[:200]
    )
    return [ShadowCounts(row.pop("pk"), **row) for row in shadows]

