"""The gateway's reads and writes, sync (run on the gateway's threads, mcpgateway.pool): an agent's
tools as MCP lists them, a call asked for (or joined), and a call as the client is answered.

A call goes through chat.outside exactly as the loop's calls go through the loop: the same gate,
rules, routes, previews and approval; chat.outside.settle applies the decision and runs the tool."""
import uuid
from dataclasses import dataclass
from datetime import datetime

import mcp_types as types

from approvals.models import Approval
from approvals.announcements.outcomes import outcome_line
from chat import outside
from chat.models import Conversation, ToolCall
from chat.tools import ToolArgumentsError, arguments_hash, registry

Status = ToolCall.Status
# Calls a second identical call joins rather than asking again: still waiting for a human, or
# approved and not yet run (its client went away before it ran: a restarted daphne), or asking its
# human a question mid-run.
JOINABLE = (Status.PENDING_APPROVAL, Status.APPROVED, Status.WAITING_FOR_INPUT)
HINTS = {"title": "title", "readOnlyHint": "read_only_hint", "destructiveHint": "destructive_hint",
         "idempotentHint": "idempotent_hint", "openWorldHint": "open_world_hint"}


def listed_tools(agent) -> list[types.Tool]:
    """The agent's tools under the names its loop calls them (`<server>__<tool>` for a tool
    server's), with their schemas, descriptions and (a tool server's) annotations."""
    return [
        types.Tool(name=spec.name, description=spec.description or None, input_schema=spec.parameters,
                   annotations=_annotations(spec.annotations))
        for spec in registry.for_agent(agent)
        if not spec.pause  # a question or a plan is the loop's model asking a human, not a tool to call
    ]


def _annotations(annotations: dict | None) -> types.ToolAnnotations | None:
    known = {HINTS[key]: value for key, value in (annotations or {}).items() if key in HINTS}
    try:
        return types.ToolAnnotations(**known) if known else None
    except ValueError:  # a server's odd hint (not a bool) is left out, not a failed listing
        return None


@dataclass(frozen=True)
class Asked:
    call_id: int
    conversation_id: uuid.UUID


def ask(user, agent, *, name: str, arguments, thread: str) -> Asked:
    """The call asked for in the caller's MCP conversation of `thread`, or the same user's identical
    call (agent, tool, arguments) that still waits for a human or to run, joined: a client that
    calls again after losing its connection (a restarted daphne) gets the one decision, never a
    second approval. Raises chat.outside.InvalidRequest."""
    call = _joinable(user, agent, name, arguments)
    if call is None:
        conversation = outside.conversation_for(user, agent, source=Conversation.Source.MCP, thread=thread)
        call = outside.request_call(conversation, tool=name, arguments=arguments)
    return Asked(call.pk, call.message.conversation_id)


def _joinable(user, agent, name, arguments) -> ToolCall | None:
    spec = registry.find(agent, name) if isinstance(name, str) else None
    if spec is None or not isinstance(arguments, dict):
        return None  # request_call says what is wrong
    try:
        digest = arguments_hash(spec.validate(arguments))
    except (ToolArgumentsError, TypeError, ValueError):
        return None
    return (
        ToolCall.objects.filter(
            message__conversation__owner=user, message__conversation__agent=agent,
            message__conversation__source=Conversation.Source.MCP,
            name=spec.name, arguments_hash=digest, is_gated=True, status__in=JOINABLE,
        )
        .select_related("message")
        .order_by("-pk")
        .first()
    )


@dataclass(frozen=True)
class Reading:
    """A call as it stands: `result` once the client can be answered, else what it waits for, and
    until when a human may decide it (a pending approval's expiry), if that is known."""

    result: types.CallToolResult | None
    waiting: str = ""
    expires_at: datetime | None = None


def settle(call_id: int) -> Reading:
    """The call brought as far as it goes without a human (chat.outside.settle: the decision
    applied, an approved call run), read as the client's answer."""
    return read(outside.settle(call_id))


def read(call: ToolCall) -> Reading:
    approval = getattr(call, "approval", None)
    status = call.status
    if status == Status.SUCCEEDED:
        return Reading(_text(call.result))
    if status == Status.FAILED:
        return Reading(_text(call.error or call.result or f"{call.name} failed.", error=True))
    if status == Status.EXPIRED and approval is not None:
        return Reading(_text(f"{call.name} was not run: nobody decided approval #{approval.pk} in time. "
                             f"{outcome_line(approval, icon=False)}.", error=True))
    if status in (Status.REJECTED, Status.CANCELLED) and approval is not None:
        return Reading(_text(f"{call.name} was not run. {outcome_line(approval, icon=False)}.", error=True))
    if status in ToolCall.FINISHED:  # interrupted, or cancelled without an approval (a stop)
        return Reading(_text(call.result or call.error or f"{call.name} was {status}.", error=True))
    if status == Status.WAITING_FOR_INPUT:
        return Reading(None, waiting=f"{call.name} asked a question; waiting for a human's answer in the conversation.")
    if status == Status.RUNNING:
        return Reading(None, waiting=f"{call.name} is running.")
    if approval is not None and approval.status == Approval.Status.PENDING:
        return Reading(None, waiting=f"Waiting for a human's decision on approval #{approval.pk} ({call.name}).",
                       expires_at=approval.expires_at)
    return Reading(None, waiting=f"{call.name} is about to run.")


def still_waiting(call_id: int) -> types.CallToolResult:
    """The answer when the wait ends before the call could be answered: say how to go on. Calling
    again with the same arguments joins the same call (ask), whatever it still waits for."""
    call = ToolCall.objects.select_related("approval").get(pk=call_id)
    approval = getattr(call, "approval", None)
    again = f"Call {call.name} again with the same arguments to keep waiting for"
    if call.status == Status.WAITING_FOR_INPUT:
        text = f"{call.name} asked a question that nobody has answered yet (see the conversation). {again} the answer."
    elif approval is not None and approval.status == Approval.Status.PENDING:
        until = f" (it expires at {approval.expires_at:%Y-%m-%d %H:%M} UTC)" if approval.expires_at else ""
        text = f"No decision yet on approval #{approval.pk} for {call.name}{until}. Nothing was run. {again} the same decision."
    else:
        text = f"{call.name} is not finished yet ({call.status}). {again} its result."
    return _text(text, error=True)


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)
