"""Approvals in the JSON API: list what the caller may see, decide one."""
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Literal

from django.http import Http404
from ninja import Router, Schema
from ninja.errors import HttpError

from .models import Approval
from .permissions import is_approver
from .services import decide

router = Router(tags=["approvals"])
MAX_OFFSET = 10**9  # far past any real list, and far inside what every database's integers hold


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


@router.post("/{approval_id}/decision", response=ApprovalItem)
def decide_approval(request, approval_id: int, payload: DecisionIn):
    if len(payload.reason) > 2000:
        raise HttpError(400, "The reason is longer than 2000 characters.")
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
