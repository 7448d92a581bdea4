"""Approval requests from outside agents, in the JSON API: ask for a decision on a call of one of
your tools under one of this app's agents (its policy, rules and routes decide who decides), and
report what happened when you ran it. Thin: chat.outside does the work."""
from typing import Any

from django.db import transaction
from django.http import Http404
from ninja import Field, Router, Schema, Status

from approvals.api import ApprovalId, ApprovalWithConversation, approval_object
from approvals.models import Approval

from . import outside
from .models import Conversation
from .selectors import agent_for

router = Router(tags=["approval requests"])
outcome_router = Router(tags=["approvals"])


class ApprovalRequestIn(Schema):
    # Loosely typed on purpose: chat.outside checks each field and a 400 names the one to fix.
    agent: Any = Field(None, description="The slug of the agent whose policy decides (its tools, risk, four eyes, rules, routes).")
    tool: Any = Field(None, description="Your tool's name (the agent need not have it: its policy still applies).")
    arguments: Any = Field(None, description="The call's arguments, a JSON object.")
    reason: Any = Field(None, description="Why you want to make the call: shown to the deciders.")
    risk: Any = Field(None, description='"low", "medium", "high" or "critical": raises the tool\'s risk, never lowers it.')
    preview: Any = Field(None, description='What the call will do, {"kind": "diff"|"email"|"file"|"fetch"|"text", "text": ...}: shown as is, escaped.')
    thread: Any = Field(None, description="Your thread's id: the requests of one thread land in one conversation of yours, titled from it.")
    expires_in: Any = Field(None, description="How many seconds the approval may wait for a human (1 or more, whole): then it expires. The agent's own timeout caps it.")


class OutcomeIn(Schema):
    status: Any = Field(None, description='"succeeded" or "failed".')
    result: Any = Field(None, description="What the call returned, or why it failed (at most 20,000 characters).")
    shown_hash: Any = Field(None, description="The approved version's `shown_hash`: the outcome of another version is refused (409).")


@router.post("", response={201: ApprovalWithConversation})
def request_approval(request, payload: ApprovalRequestIn):
    """Ask whether a call may run. 201 with the approval: `pending` until a human decides (wait with
    GET /api/approvals/{id}?wait=N), or decided at once: `approved`/`rejected` via `rule`, or
    `approved` via `policy` when the agent does not gate the tool. 400 names the field to fix."""
    if not isinstance(payload.agent, str) or (agent := agent_for(request.auth, payload.agent)) is None:
        raise outside.InvalidRequest("agent", "Unknown agent: `agent` must be the slug of an agent you may use.")
    if not isinstance(payload.arguments, dict):  # before a conversation is made for the thread
        raise outside.InvalidRequest("arguments", "`arguments` must be a JSON object.")
    # One transaction: a request refused (a field to fix, a quota) leaves no empty conversation behind.
    with transaction.atomic():
        thread = "" if payload.thread is None else payload.thread
        conversation = outside.conversation_for(request.auth, agent, source=Conversation.Source.API, thread=thread)
        call = outside.request_call(
            conversation, tool=payload.tool, arguments=payload.arguments, reason=payload.reason, risk=payload.risk, preview=payload.preview,
            expires_in=payload.expires_in,
        )
    return Status(201, approval_object(request.auth, call.approval.pk))


@outcome_router.post("/{approval_id}/outcome", response=ApprovalWithConversation)
def report_outcome(request, approval_id: ApprovalId, payload: OutcomeIn):
    """Say what happened when you ran the approved call: once, for the version approved (its
    `shown_hash`). 409 for another version, a second report, or an approval not approved; 403 for
    a caller other than the one who asked; 404 for an approval you may not see."""
    if not isinstance(payload.shown_hash, str):
        raise outside.InvalidRequest("shown_hash", "`shown_hash` must be the approved version's `shown_hash`.")
    try:
        outside.report_outcome(
            approval_id, user=request.auth, status=payload.status, result=payload.result, shown_hash=payload.shown_hash
        )
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    return approval_object(request.auth, approval_id)
