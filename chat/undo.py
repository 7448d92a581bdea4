"""Undo where a tool can undo (a ToolSpec's `reversible`, e.g. chat.reversals).

A succeeded call of a reversible tool kept what it changed and a fingerprint of what it left
(ToolCall.undo_state, stored with its success by chat.loop, until `undo_until`). Undo is itself a
gated call of the `undo` tool, in a message of its own in the conversation (outside the model's
context), its reason naming whoever undid (the audit chain keeps it), screened by the same rules and
asked, approved and recorded like any call. Approved, it runs once (chat.tasks.run_undo, the loop's
claim), and only while what the call left is still there: a file changed since is never overwritten."""
from dataclasses import replace
from datetime import timedelta

import pydantic
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.deciders import routing
from approvals.policy import rules
from approvals.models import Approval
from approvals.permissions import can_see

from .gating import automatic_decision, explained, gate_call, request, screen, tool_context
from .messages import append_message, lock_conversation, set_loaded_calls
from .models import Conversation, Message, ToolCall
from .tools import Preview, ToolContext, ToolError, ToolSpec, registry

Status = ToolCall.Status
NAME = "undo"
NOT_UNDONE = (Status.REJECTED, Status.CANCELLED, Status.EXPIRED, Status.LAPSED)  # an undo that never ran


class CannotUndo(Exception):
    """Why the call cannot be undone (the API answers 409)."""


class AlreadyUndone(CannotUndo):
    pass


# --- what a reversible call keeps (chat.loop, as it runs) --------------------------------------


def keeping(spec: ToolSpec, arguments: dict, context: ToolContext):
    """For a reversible tool: a function to call once the call succeeded, returning the fields
    stored with its success (what it changed, what it left, until when it may be undone)."""
    if spec.reversible is None:
        return None
    try:
        kept = spec.reversible.before(arguments, context)
    except Exception:
        kept = None  # the call still runs; it just cannot be undone

    def fields() -> dict:
        if kept is None:
            return {"undo_state": {"kept": None, "why": "nothing was kept: too large, or unreadable"}}
        left = spec.reversible.after(arguments, context)
        until = timezone.now() + timedelta(seconds=settings.HITL_UNDO_SECONDS)
        return {"undo_state": {"kept": kept, "left": left, "arguments": arguments}, "undo_until": until}

    return fields


def reversible(spec: ToolSpec | None) -> bool:
    return spec is not None and spec.reversible is not None


def why_not(call: ToolCall, *, now=None) -> str:
    """Why the stored call cannot be undone now, "" if it can (what the file is now is checked when
    the undo runs, and when it is requested)."""
    spec = registry.get(call.name)
    if call.undo_of_id is not None:
        return "An undo is not undone: do the call again instead."
    if not reversible(spec):
        return f"{call.name} cannot be undone."
    if call.status != Status.SUCCEEDED:
        return "Only a call that succeeded can be undone."
    state = call.undo_state or {}
    if state.get("kept") is None:
        return f"This call cannot be undone: {state.get('why', 'it kept nothing to put back')}."
    if call.undo_until is None or call.undo_until <= (now or timezone.now()):
        return "Too late: it could be undone until " + (f"{call.undo_until:%Y-%m-%d %H:%M} UTC." if call.undo_until else "it ran.")
    return ""


def changed_since(call: ToolCall, context: ToolContext) -> str:
    """Why undoing it now would lose something: what the call left is no longer there."""
    spec = registry.get(call.name)
    state = call.undo_state
    if spec.reversible.after(state["arguments"], context) != state["left"]:
        target = " or ".join(str(state["arguments"].get(key)) for key in spec.reversible.keys) or "what it changed"
        return f"{target} changed since the call: undoing it would lose that change."
    return ""


def none_yet(call: ToolCall) -> None:
    """As if `call.undos` were prefetched, empty: a call that is only now succeeding has no undo."""
    undos = call.undos.all()
    undos._result_cache, undos._prefetch_done = [], True
    call._prefetched_objects_cache = {**getattr(call, "_prefetched_objects_cache", {}), "undos": undos}


def undo_calls(tool_call_ids: list[int]) -> set[int]:
    """Which of these calls are undos (one query)."""
    return set(ToolCall.objects.filter(pk__in=tool_call_ids, undo_of__isnull=False).values_list("pk", flat=True))


def live_undo(call: ToolCall) -> ToolCall | None:
    """The undo of the call that is asked, approved, running or ran (at most one)."""
    return call.undos.exclude(status__in=NOT_UNDONE).order_by("-pk").first()


# --- the undo as a call ---------------------------------------------------------------------------


class UndoArguments(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")  # the undone call's `keys` (its path), for rules to match

    call_id: int
    tool: str


def _run(context: ToolContext, call_id: int, tool: str, **keys) -> str:
    """The undo, once approved and claimed: put back what the call kept, if nothing changed since."""
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().filter(pk=call_id, message__conversation_id=context.conversation_id).first()
        if call is None or call.name != tool:
            raise ToolError("Not undone: that call is not in this conversation.")
        done = call.undos.filter(status=Status.SUCCEEDED).exists()
    if done:
        raise ToolError("Not undone: it was undone already.")
    if why := why_not(call) or changed_since(call, context):
        raise ToolError(f"Not undone: {why}")
    state = call.undo_state
    return registry.get(call.name).reversible.restore(state["kept"], state["arguments"], context)


def _preview(context: ToolContext, call_id: int, tool: str, **keys) -> Preview:
    call = ToolCall.objects.filter(pk=call_id, message__conversation_id=context.conversation_id).first()
    if call is None or not call.undo_state or call.undo_state.get("kept") is None:
        return Preview("text", "Nothing to put back: the undo will fail.")
    state = call.undo_state
    return registry.get(call.name).reversible.preview(state["kept"], state["arguments"], context)


def _describe(arguments: dict) -> str:
    target = next((str(value) for name, value in arguments.items() if name not in ("call_id", "tool")), "")
    return f"Undo {arguments.get('tool')}" + (f" of {target}" if target else "") + f" (call {arguments.get('call_id')})"


UNDO = ToolSpec(
    name=NAME, description="Undo an earlier call of a reversible tool.", function=_run, arguments_model=UndoArguments,
    needs_approval=True, risk="medium", takes_context=True, preview=_preview, describe=_describe, offered=False,
)
registry.tools[NAME] = UNDO  # found by name for its cards; offered to no model


def may_undo(user, call: ToolCall) -> bool:
    """The conversation's owner, or whoever may see the call's approval (its row in the history)."""
    if call.message.conversation.owner_id == user.pk:
        return True
    approval = Approval.objects.filter(tool_call=call).select_related("conversation").first()
    return approval is not None and can_see(user, approval)


def request_undo(user, tool_call_id: int) -> ToolCall:
    """Ask for the undo of a call, as `user`: the undo call, gated (and perhaps decided at once by a
    rule) in a message of its own. Raises ToolCall.DoesNotExist (not theirs), CannotUndo, AlreadyUndone."""
    with transaction.atomic():
        call = ToolCall.objects.select_for_update(of=("self",)).select_related("message__conversation__agent").filter(
            pk=tool_call_id, message__conversation__isnull=False
        ).first()
        if call is None or not may_undo(user, call):
            raise ToolCall.DoesNotExist
        conversation = call.message.conversation
        if existing := live_undo(call):
            raise AlreadyUndone(f"Call {call.pk} has an undo already: call {existing.pk} ({existing.get_status_display().lower()}).")
        if why := why_not(call) or changed_since(call, tool_context(conversation)):
            raise CannotUndo(why)
        undo = _store_undo(user, call, conversation)
    return undo


def _store_undo(user, call: ToolCall, conversation: Conversation) -> ToolCall:
    spec = registry.get(call.name)
    ran = call.undo_state["arguments"]
    arguments = {"call_id": call.pk, "tool": call.name, **{key: ran[key] for key in spec.reversible.keys if key in ran}}
    gated = gate_call(UNDO, UNDO.validate(arguments), conversation)
    # Whoever undid is named in the reason the audit chain keeps; the approval stays the conversation
    # owner's request, so that they, and whoever may decide their calls, see and decide it.
    asked = f"{user.get_username()} asked to undo call {call.pk} ({call.name})."
    gated = replace(gated, gate=replace(gated.gate, reason=f"{asked} {gated.gate.reason}".strip()))
    lock_conversation(conversation)
    message = append_message(
        conversation, role=Message.Role.ASSISTANT, locked=True, in_model_context=False, author=user,
        content=asked,
    )
    undo = ToolCall.objects.create(
        message=message, position=0, call_id=f"undo-{call.pk}-{message.position}", name=NAME, arguments=gated.arguments,
        raw_arguments="", arguments_hash=gated.arguments_hash, status=Status.PENDING_APPROVAL, is_gated=True, undo_of=call,
    )
    live_routes = routing.live_routes(conversation.agent_id)
    screening, suggestion, route = screen(undo, gated, conversation, rules.applicable(conversation, recently_expired=True), live_routes)
    applied = rules.apply(screening)
    automatic = automatic_decision(applied)
    undo.approval = request(
        undo, gated, conversation, suggestion=None, route=route, applied=applied,
        explanation=explained(gated, screening, applied, route, conversation),
    )
    if automatic is not None:
        automatic(undo.approval)
    set_loaded_calls(message, [undo])  # the message pushed on commit shows its card
    return undo
