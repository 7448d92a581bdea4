"""What a card says of its deadline: the time left once warned, who extended it, the decisions that
came too late, and the approval that asked an expired one again."""
import math
from dataclasses import dataclass

from django import template
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from approvals.models import Approval, LateDecision
from approvals.policy import timeouts

register = template.Library()


@register.filter
def expires_in(approval) -> str:
    """"5 min", "under a minute": the time left, as the warning says it when rendered."""
    seconds = (approval.expires_at - timezone.now()).total_seconds() if approval.expires_at else 0
    if seconds < 60:
        return "under a minute"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


@register.filter
def at_deadline(approval) -> str:
    """What its deadline does, as the card says it: "Expires", "Rejected" or "Approved" (approvals.policy.timeouts)."""
    return timeouts.described(approval.timeout_action)


@dataclass
class Expiry:
    late: list[LateDecision]
    asked_again: Approval | None
    askable: bool  # Ask again makes sense: not asked yet, nor a call whose caller was told it timed out


@register.simple_tag
def expiry_of(approval) -> Expiry:
    """An expired card's late decisions, the approval asking it again, and whether Ask again is
    offered: read only for an expired card (two small queries), never for the pending and decided
    ones a page mostly shows. (An MCP client's call, or a tool's own question, is not asked again.)"""
    if approval.status != Approval.Status.EXPIRED:
        return Expiry([], None, False)
    late = list(LateDecision.objects.filter(approval=approval).select_related("user"))
    again = Approval.objects.filter(asked_again_from=OuterRef("pk")).order_by().values("pk")[:1]
    source, asked_by, again_id = Approval.objects.filter(pk=approval.pk).annotate(again=Subquery(again)).values_list(
        "conversation__source", "tool_call__asked_by", "again"
    ).get()
    asked_again = Approval.objects.only("pk", "status").get(pk=again_id) if again_id else None
    return Expiry(late, asked_again, asked_again is None and source != "mcp" and asked_by is None)


@register.filter
def tried(decision: str) -> str:
    return {"approve": "tried to approve", "reject": "tried to reject"}.get(decision, f"tried to {decision}")
