"""Rules in the JSON API: list the caller's, make one, enable or disable one, remove one."""
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from django.http import Http404
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from . import rulemaking, shadow
from ..models import Rule

router = Router(tags=["rules"])

RuleId = Annotated[int, Field(ge=1, le=2**63 - 1)]  # as the database stores them (64-bit)
Scope = Literal["conversation", "agent_user", "agent", "global"]


class RuleIn(Schema):
    effect: Literal["allow", "deny", "ask"] = Field(
        description="deny rejects at once; ask makes a human decide, even a call the policy would run; allow approves at once. Applied in that order."
    )
    tool: str = Field(description="A tool's name, or a glob such as notes__*.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description='Conditions, all of which must match: {name: glob} or {name: {"regex": "..."}}.'
    )
    scope: Scope = Field(description="conversation, agent_user (your conversations with an agent); agent and global: approvers only.")
    conversation_id: UUID | None = None
    agent: str = Field("", description="The agent's slug, for the agent_user and agent scopes.")
    expires_at: datetime | None = None
    max_uses: int | None = Field(None, ge=1, le=10**9)
    note: str = ""
    mode: Literal["live", "shadow"] = Field(
        "live", description="shadow: the rule decides nothing, and what it would have done to live calls is counted (`would_have`) until promoted."
    )
    after: dict[str, Any] | None = Field(
        None, description='Applies only once an earlier call of the same conversation exists: {"tool": ..., "status": "succeeded", '
        '"same": [argument names whose values must be equal], "within_seconds": n}.'
    )
    at_most: dict[str, Any] | None = Field(
        None, description='Decides at most `count` calls in any `within_seconds` window; the rest are asked as if it were not there: {"count": n, "within_seconds": n}.'
    )


class WouldHaveOut(Schema):
    allow: int = Field(description="Live calls it would have allowed.")
    deny: int
    ask: int
    changed: int = Field(description="Of those, the calls it would have decided otherwise than they were.")


class RuleOut(Schema):
    id: int
    effect: str
    tool: str
    arguments: dict
    scope: str
    conversation_id: str | None
    agent: str | None
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    max_uses: int | None
    uses: int
    last_used_at: datetime | None
    note: str
    enabled: bool
    mode: Literal["live", "shadow"]
    after: dict | None
    at_most: dict | None
    would_have: WouldHaveOut | None = Field(
        None, description="A shadow rule's counts over live calls since it was saved (GET /api/rules/{id}); null in lists."
    )


class RuleList(Schema):
    items: list[RuleOut]
    count: int


class RuleChange(Schema):
    enabled: bool


def rule_out(rule: Rule) -> dict:
    return {
        "id": rule.pk,
        "effect": rule.effect,
        "tool": rule.tool,
        "arguments": rule.arguments,
        "scope": rule.scope,
        "conversation_id": str(rule.conversation_id) if rule.conversation_id else None,
        "agent": rule.agent.slug if rule.agent else None,
        "created_by": rule.created_by.get_username(),
        "created_at": rule.created_at,
        "expires_at": rule.expires_at,
        "max_uses": rule.max_uses,
        "uses": rule.uses,
        "last_used_at": rule.last_used_at,
        "note": rule.note,
        "enabled": rule.enabled,
        "mode": rule.mode,
        "after": rule.after,
        "at_most": rule.at_most,
    }


def rule_with_counts(rule: Rule) -> dict:
    """A rule with what it would have done to live calls (one query): a shadow rule's, or a promoted
    one's while it was in the shadow."""
    return rule_out(rule) | {"would_have": vars(shadow.would_have(rule))}


@router.get("", response=RuleList)
def list_rules(request):
    """The rules the caller may see: those they made and those of their conversations; for an
    approver also every agent-wide and global rule. Newest first; removed rules are not listed."""
    rules = list(rulemaking.visible_rules(request.auth)[:1000])
    return {"items": [rule_out(rule) for rule in rules], "count": len(rules)}


@router.post("", response={201: RuleOut})
def create_rule(request, payload: RuleIn):
    """Make a rule. 403 for a scope the caller may not use (agent and global are for approvers), 404
    for a conversation or agent that is not theirs, 400 for a rule that says nothing valid."""
    data = payload.dict()
    rule = rulemaking.create(request.auth, **data)
    return Status(201, rule_out(rule))


@router.get("/{rule_id}", response=RuleOut)
def get_rule(request, rule_id: RuleId):
    """One rule, with `would_have`: what it would have done to live calls while in the shadow."""
    try:
        return rule_with_counts(rulemaking.rule_for(request.auth, rule_id))
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None


@router.post("/{rule_id}/promote", response=RuleOut)
def promote_rule(request, rule_id: RuleId):
    """Make a shadow rule live: a new policy version. 409 for a rule already live."""
    try:
        return rule_with_counts(rulemaking.promote(request.auth, rule_id))
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None
    except shadow.NotShadow as exc:
        raise HttpError(409, str(exc)) from None


@router.patch("/{rule_id}", response=RuleOut)
def change_rule(request, rule_id: RuleId, payload: RuleChange):
    """Enable or disable a rule; the decisions it made stand."""
    try:
        return rule_out(rulemaking.set_enabled(request.auth, rule_id, payload.enabled))
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None


@router.delete("/{rule_id}", response={204: None})
def delete_rule(request, rule_id: RuleId):
    """Remove a rule: it stops deciding at once; the decisions it made keep naming it."""
    try:
        rulemaking.remove(request.auth, rule_id)
    except Rule.DoesNotExist:
        raise Http404("No such rule.") from None
    return Status(204, None)
