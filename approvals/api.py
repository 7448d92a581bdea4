"""Approvals in the JSON API: list what the caller may see, decide one, decide many."""
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Annotated, Literal

from django.http import Http404
from ninja import Field, Router, Schema
from ninja.errors import HttpError

from .models import Approval
from .permissions import is_approver
from .services import decide, decide_many

router = Router(tags=["approvals"])
MAX_OFFSET = 10**9  # far past any real list, and far inside what every database's integers hold
MAX_REASON = 2000
MAX_IDS = 1000
ApprovalId = Annotated[int, Field(ge=1, le=2**63 - 1)]  # as the database stores them (64-bit)


class ApprovalOut(Schema):
    id: int
    status: str
    reason: str
    risk: str
    requested_at: datetime
    decided_by: str | None
    decided_via: str
    decided_at: datetime | None
    rejection_reason: str


class ToolCallSummary(Schema):
    id: int
    name: str
    arguments: dict
    status: str


class ApprovalItem(ApprovalOut):
    conversation_id: str
    tool_call: ToolCallSummary


class ApprovalList(Schema):
    items: list[ApprovalItem]
    count: int


class DecisionIn(Schema):
    decision: Literal["approve", "reject"]
    reason: str = ""


class DecisionsIn(DecisionIn):
    ids: list[ApprovalId]


class DecisionsOut(Schema):
    decided: list[ApprovalItem]
    already_decided: list[int]
    not_allowed: list[int]
    not_found: list[int]


def approval_out(approval: Approval) -> dict:
    return {
        "id": approval.pk,
        "status": approval.status,
        "reason": approval.reason,
        "risk": approval.risk,
        "requested_at": approval.requested_at,
        "decided_by": approval.decided_by.get_username() if approval.decided_by else None,
        "decided_via": approval.decided_via,
        "decided_at": approval.decided_at,
        "rejection_reason": approval.rejection_reason,
    }


def approval_item(approval: Approval) -> dict:
    call = approval.tool_call
    return approval_out(approval) | {
        "conversation_id": str(approval.conversation_id),
        "tool_call": {"id": call.pk, "name": call.name, "arguments": call.arguments, "status": call.status},
    }


def visible_approvals(user):
    approvals = Approval.objects.select_related("tool_call", "decided_by")
    return approvals if is_approver(user) else approvals.filter(requested_by=user)


@router.get("", response=ApprovalList)
def list_approvals(
    request,
    status: Approval.Status | None = None,
    agent: str = "",
    tool: str = "",
    since: datetime | None = None,
    limit: int = 100,
    offset: int = 0,
):
    """The approvals the caller may see (their own, or all for an approver), oldest first.
    `since` keeps those requested at or after it; `limit` is at most 500."""
    approvals = visible_approvals(request.auth)
    if status:
        approvals = approvals.filter(status=status)
    if agent:
        approvals = approvals.filter(conversation__agent__slug=agent)
    if tool:
        approvals = approvals.filter(tool_call__name=tool)
    if since:
        try:
            approvals = approvals.filter(requested_at__gte=since.astimezone(dt_timezone.utc))
        except OverflowError:
            raise HttpError(400, "`since` is outside the range of dates this API handles.") from None
    limit = max(1, min(limit, 500))
    offset = max(0, min(offset, MAX_OFFSET))
    page = approvals.order_by("requested_at", "pk")[offset : offset + limit]
    return {"items": [approval_item(a) for a in page], "count": approvals.count()}


@router.post("/decisions", response=DecisionsOut)
def decide_approvals(request, payload: DecisionsIn):
    """Decide 1 to 1000 approvals in one request. Each id lands in one list: `decided` (with the
    stored decision), `already_decided` (someone decided first), `not_allowed` (four eyes: an
    approver other than the requester must decide it) or `not_found` (unknown, or not yours)."""
    if not 1 <= len(payload.ids) <= MAX_IDS:
        raise HttpError(400, f"Send between 1 and {MAX_IDS} approval ids.")
    if len(payload.reason) > MAX_REASON:
        raise HttpError(400, f"The reason is longer than {MAX_REASON} characters.")
    outcome = decide_many(
        payload.ids,
        user=request.auth,
        approve=payload.decision == "approve",
        via=Approval.Via.API,
        reason=payload.reason,
    )
    decided = visible_approvals(request.auth).filter(pk__in=[a.pk for a in outcome.decided]).order_by("pk")
    return {
        "decided": [approval_item(a) for a in decided],
        "already_decided": outcome.already_decided,
        "not_allowed": outcome.not_allowed,
        "not_found": outcome.not_found,
    }


@router.post("/{approval_id}/decision", response=ApprovalItem)
def decide_approval(request, approval_id: int, payload: DecisionIn):
    if len(payload.reason) > MAX_REASON:
        raise HttpError(400, f"The reason is longer than {MAX_REASON} characters.")
    try:
        decide(
            approval_id,
            user=request.auth,
            approve=payload.decision == "approve",
            via=Approval.Via.API,
            reason=payload.reason,
        )
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    return approval_item(visible_approvals(request.auth).get(pk=approval_id))
