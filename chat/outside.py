"""Calls asked for from outside: an outside agent's approval request (the JSON API) and an MCP
client's tool call (mcpgateway). Each lands in a conversation of its own source, one per outside
thread of its caller, as an assistant message with one call, and goes through exactly what the
loop's calls go through: the tool's schema when the agent has the tool, the agent's policy, the
rules, the routes, the same approval, card, surfaces and audit chain.

An outside conversation is never advanced by the loop (it stays idle: no model is called) and
nobody chats in it. An approval request's call is run by the outside agent, which then reports
what happened (report_outcome); an MCP call is run here, by settle(), once approved."""
import json
import re
import uuid
from dataclasses import replace

from django.db import IntegrityError, transaction

from approvals import services
from approvals.deciders import routing
from approvals.policy import explain, rules
from approvals.models import Approval
from approvals.permissions import can_see
from approvals.policy.gate import RISKS, Gate, check
from core import live
from core.inputs import is_storable
from core.visible import has_invisible, reveal

from . import fragments, loop, quotas
from .gating import (
    MAX_RAW_ARGUMENTS, GatedCall, automatic_decision, confirmation_hint, explained, gate_call, hold, request, screen, tool_context,
)
from .messages import append_message, lock_conversation, set_loaded_calls
from .models import Conversation, ToolCall
from .tools import OutsideTool, Preview, ToolArgumentsError, ToolSpec, arguments_hash, registry

MAX_THREAD = 200  # Conversation.external_thread
MAX_TOOL = 200  # ToolCall.name
MAX_REASON = 2000
MAX_PREVIEW = 20_000
MAX_RESULT = 20_000
MAX_EXPIRES_IN = 30 * 24 * 60 * 60  # a month: a wait longer than that is a forgotten one
PREVIEW_KINDS = ("diff", "email", "file", "fetch", "text")
# A name the caller chose, shown to deciders and matched by rules and routes: never a glob (an "Always
# allow" of `*` would allow every tool), nor invisible, look-alike or markup characters.
OUTSIDE_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]+")
Status = ToolCall.Status


class InvalidRequest(ValueError):
    """Input a caller must fix; `field` names it (the API answers 400 with both)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


class OutcomeRefused(services.OutcomeConflict):
    """Not a call from outside: the loop records its own calls' results."""


class NotTheRequester(services.DecisionError):
    """Only the caller who asked reports what happened."""


def conversation_for(user, agent, *, source: str, thread: str = "") -> Conversation:
    """The caller's conversation for `thread` (made on first use, titled from it); a request without
    a thread gets a conversation of its own. A thread is looked up among the caller's own only:
    another user's thread of the same name is never joined."""
    if not isinstance(thread, str) or len(thread) > MAX_THREAD or not is_storable(thread):
        raise InvalidRequest("thread", f"`thread` must be text of at most {MAX_THREAD} characters, without NUL characters.")
    thread = thread.strip()
    found = {"owner": user, "agent": agent, "source": source, "external_thread": thread}
    if thread and (conversation := Conversation.objects.filter(**found).first()) is not None:
        return conversation
    try:
        with transaction.atomic():
            quotas.check_outside_request(user)  # what fills the database here is requests: their quota
            return Conversation.objects.create(**found, title=thread[:200] or _untitled(source))
    except IntegrityError:  # made by a concurrent request of the same thread a moment ago
        return Conversation.objects.get(**found)


def _untitled(source: str) -> str:
    return "Approval requests" if source == Conversation.Source.API else "MCP calls"


def request_call(conversation: Conversation, *, tool, arguments, reason="", risk=None, preview=None, expires_in=None) -> ToolCall:
    """Ask for one call in an outside conversation, as the loop asks for its model's calls. Returns
    the stored call with its approval (`call.approval`) if it has one: pending, or decided at once by
    a rule, or (an approval request the agent's policy does not gate) approved via `policy`. An MCP
    call the policy does not gate has no approval: it is approved to run. `expires_in`: the
    caller's wait in seconds, capped by the agent's timeout. Raises InvalidRequest."""
    reason, risk, expires_in = _checked_reason(reason), _checked_risk(risk), _checked_expires_in(expires_in)
    spec = _spec(conversation, tool)
    arguments = _checked_arguments(spec, arguments)
    if conversation.source == Conversation.Source.MCP:
        gated = gate_call(spec, arguments, conversation)  # the loop's own gate, preview and hint
    else:
        gated = _gate_request(spec, arguments, conversation, risk=risk, preview=_checked_preview(preview), reason=reason)
    call = ToolCall(
        position=0,
        call_id=f"{conversation.source}-{uuid.uuid4().hex}",
        name=spec.name,
        arguments=arguments,
        raw_arguments=json.dumps(arguments, ensure_ascii=False)[:MAX_RAW_ARGUMENTS],
        arguments_hash=gated.arguments_hash,
        is_gated=gated.gate.required,
        status=Status.PENDING_APPROVAL if gated.gate.required else Status.APPROVED,
    )
    screening = suggestion = route = None
    # Read before the write transaction, as the loop does: the rules (a deny or ask rule may hold
    # what the policy runs), then for a call a human may decide its route and what the rules say.
    live_rules = rules.applicable(conversation, recently_expired=True)
    as_the_policy_says = gated
    if not gated.gate.required:
        gated = hold(call, gated, conversation, live_rules, with_preview=conversation.source == Conversation.Source.MCP)
        if gated.rules_only and reason:  # the caller's words first, as for a call the policy gates
            gated = replace(gated, gate=replace(gated.gate, reason=reason))
        call.is_gated, call.status = gated.gate.required, Status.PENDING_APPROVAL if gated.gate.required else Status.APPROVED
    if gated.gate.required:
        screening, suggestion, route = screen(call, gated, conversation, live_rules, routing.live_routes(conversation.agent_id))
    with transaction.atomic():
        lock_conversation(conversation)
        quotas.check_outside_request(conversation.owner)
        # The reason is the card's ("Why it asks"): the turn itself says nothing more.
        message = append_message(conversation, role="assistant", content="", push=False, locked=True, author=conversation.owner)
        call.message = message
        applied = rules.apply(screening) if screening is not None else rules.Applied()
        if gated.rules_only and not applied.effect:  # its rules had no use left: as the policy says
            gated = as_the_policy_says
            call.is_gated, call.status = False, Status.APPROVED
        call.save()
        if gated.gate.required:
            gated = _waiting_at_most(gated, expires_in)
            automatic = automatic_decision(applied)
            explanation = explained(gated, screening, applied, route, conversation)
            call.approval = request(
                call, gated, conversation, suggestion=None if automatic else suggestion, route=route, applied=applied,
                explanation=explanation,
            )
            if automatic is not None:
                automatic(call.approval)
        elif conversation.source == Conversation.Source.API:
            # The caller asked: the answer is an approval too, approved by the agent's policy, in the chain.
            explanation = explained(gated, screening, applied, None, conversation, by_policy=True)
            call.approval = request(call, gated, conversation, suggestion=None, route=None, explanation=explanation)
            services.approve_by_policy(call.approval)
        set_loaded_calls(message, [call])
        live.push(live.conversation_group(conversation.pk), lambda: fragments.message_html(message, oob=True))
    return call


def _spec(conversation: Conversation, tool) -> ToolSpec:
    """The agent's tool of that name; for an approval request, a tool the agent does not have is
    described by the request alone (its policy still applies: require_approval, every tool)."""
    if not isinstance(tool, str) or not tool.strip() or len(tool) > MAX_TOOL or not is_storable(tool):
        raise InvalidRequest("tool", f"`tool` must be a tool's name: text of 1 to {MAX_TOOL} characters.")
    spec = registry.find(conversation.agent, tool)
    if spec is not None and spec.pause:
        raise InvalidRequest("tool", f"{tool} asks a human a question or a plan: only actions are requested from outside.")
    if spec is not None:
        return spec
    if conversation.source == Conversation.Source.MCP:
        raise InvalidRequest("name", f"Unknown tool {tool!r}: tools/list says which tools this agent has.")
    if not OUTSIDE_TOOL_NAME.fullmatch(tool):
        raise InvalidRequest("tool", "`tool` must be a tool's name of ASCII letters, digits and _ . - : / only.")
    return OutsideTool.named(tool)


def _checked_arguments(spec: ToolSpec, arguments) -> dict:
    if not isinstance(arguments, dict):
        raise InvalidRequest("arguments", "`arguments` must be a JSON object.")
    try:
        raw = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    except ValueError:  # Python's parser takes NaN and Infinity; JSON (and the database's check) has no such numbers
        raise InvalidRequest("arguments", "`arguments` may not hold NaN or Infinity: JSON has no such numbers.") from None
    if len(raw) > MAX_RAW_ARGUMENTS:
        raise InvalidRequest("arguments", f"`arguments` are too large ({len(raw)} characters; at most {MAX_RAW_ARGUMENTS}).")
    if "\\u0000" in raw.lower():
        raise InvalidRequest("arguments", "`arguments` contain a NUL character.")
    try:
        return spec.validate(arguments)
    except ToolArgumentsError as exc:
        raise InvalidRequest("arguments", str(exc)) from None


def _checked_reason(reason) -> str:
    if reason is None:
        return ""
    if not isinstance(reason, str) or len(reason) > MAX_REASON or not is_storable(reason):
        raise InvalidRequest("reason", f"`reason` must be text of at most {MAX_REASON} characters, without NUL characters.")
    return reason.strip()


def _checked_expires_in(expires_in) -> int | None:
    if expires_in is None:
        return None
    if isinstance(expires_in, bool) or not isinstance(expires_in, int) or not 1 <= expires_in <= MAX_EXPIRES_IN:
        raise InvalidRequest("expires_in", f"`expires_in` must be a whole number of seconds from 1 to {MAX_EXPIRES_IN}.")
    return expires_in


def _waiting_at_most(gated, expires_in: int | None):
    """The gate with the caller's wait, never longer than the agent's own timeout (none: theirs)."""
    if expires_in is None:
        return gated
    own = gated.gate.timeout_seconds
    return replace(gated, gate=replace(gated.gate, timeout_seconds=min(own, expires_in) if own else expires_in))


def _checked_risk(risk) -> str | None:
    if risk is not None and risk not in RISKS:
        raise InvalidRequest("risk", f"`risk` must be one of {', '.join(RISKS)}.")
    return risk


def _checked_preview(preview) -> Preview | None:
    if preview is None:
        return None
    if not isinstance(preview, dict):
        raise InvalidRequest("preview", '`preview` must be an object: {"kind": ..., "text": ...}.')
    kind, text = preview.get("kind"), preview.get("text")
    if kind not in PREVIEW_KINDS:
        raise InvalidRequest("preview.kind", f"`preview.kind` must be one of {', '.join(PREVIEW_KINDS)}.")
    if not isinstance(text, str) or not is_storable(text):
        raise InvalidRequest("preview.text", "`preview.text` must be text without NUL characters.")
    if len(text) > MAX_PREVIEW:
        raise InvalidRequest("preview.text", f"`preview.text` is over the limit ({len(text)} characters; at most {MAX_PREVIEW}).")
    return Preview(kind, reveal(text))  # shown as ours are: invisible characters spelled out


def _gate_request(spec: ToolSpec, arguments: dict, conversation: Conversation, *, risk, preview, reason) -> GatedCall:
    """An approval request gated by the agent's policy (approvals.policy.gate.check), as its own calls
    are. The caller's risk can raise the tool's, never lower it; the caller's preview is what the
    deciders see (the call runs where the caller is: a preview taken here would show our world)."""
    if risk is not None and RISKS.index(risk) > RISKS.index(spec.risk):
        spec = replace(spec, risk=risk)
    try:
        gate = check(spec, arguments, conversation.agent, tool_context(conversation))
    except Exception as exc:  # noqa: BLE001  (a broken gate function fails closed: ask a human)
        gate = Gate(True, f"The approval rule for {spec.name} failed ({exc.__class__.__name__}).", spec.risk)
    if risk is not None and RISKS.index(risk) > RISKS.index(gate.risk):  # a gate function's own risk, raised
        gate = replace(gate, risk=risk, approver_required=RISKS.index(risk) > RISKS.index(conversation.agent.owner_max_risk))
    if reason:
        # The caller's words, and ours when they warn of what the arguments hide: never in their place.
        reason = f"{reason} ({gate.reason})" if gate.required and has_invisible(arguments) else reason
        gate = replace(gate, reason=reason)
    elif not gate.required:
        gate = replace(gate, reason=f"{conversation.agent.name} does not gate {spec.name}: approved by its policy.")
    digest = arguments_hash(arguments)
    hint = confirmation_hint(spec, arguments, digest) if gate.required and gate.risk == "critical" else ""
    steps = explain.gate(spec, conversation.agent, gate, arguments, caller_risk=risk if risk is not None and risk == gate.risk else None)
    return GatedCall(arguments, digest, gate, preview, hint, annotations=spec.annotations, steps=tuple(steps), spec=spec)


def settle(tool_call_id: int) -> ToolCall:
    """An MCP call brought as far as it goes without a human: its decision applied, the tool run
    once approved (the loop's own run: claimed by a conditional update, the version checked again),
    resumed once a question its tool asked is answered. Safe to call again, from any thread."""
    call = ToolCall.objects.select_related("message__conversation__agent").get(pk=tool_call_id)
    loop.settle_call(call, call.message.conversation)
    return ToolCall.objects.select_related("approval__decided_by").get(pk=tool_call_id)


def report_outcome(approval_id: int, *, user, status: str, result: str = "", shown_hash: str) -> Approval:
    """What the outside agent says happened when it ran the call approved here: once, for the
    version approved, by the caller who asked. Kept in the audit chain (approvals.Outcome) and shown
    on the card (the call succeeded or failed, with `result`). Raises Approval.DoesNotExist (not
    theirs to see), NotTheRequester, InvalidRequest or OutcomeRefused."""
    approval = Approval.objects.select_related("tool_call", "conversation").filter(pk=approval_id).first()
    if approval is None or not can_see(user, approval):
        raise Approval.DoesNotExist
    if status not in ("succeeded", "failed"):
        raise InvalidRequest("status", '`status` must be "succeeded" or "failed".')
    if result is None:
        result = ""
    if not isinstance(result, str) or len(result) > MAX_RESULT or not is_storable(result):
        raise InvalidRequest("result", f"`result` must be text of at most {MAX_RESULT} characters, without NUL characters.")
    if approval.conversation.source != Conversation.Source.API:
        raise OutcomeRefused("Only a call requested from outside (POST /api/approval-requests) has its outcome reported.")
    if approval.conversation.owner_id != user.pk:
        raise NotTheRequester("Only the caller who requested the approval reports what happened.")
    loop.apply_decision(approval.tool_call_id)  # a decision a worker has not yet copied onto the call
    with transaction.atomic():
        services.record_outcome(approval, user=user, status=status, result=result, shown_hash=shown_hash)
        field = "result" if status == "succeeded" else "error"
        if loop.finish_outside_call(approval.tool_call, status, **{field: result}):
            return approval
    raise OutcomeRefused("The call's outcome is already recorded.")  # not reached: the chain's lock holds
