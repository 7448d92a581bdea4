"""Validating and gating one call, for a model's call (the loop) and a human's edit (approvals):
the tool's schema, the policy, the preview and what a human types to approve a critical call."""
import json
import logging
from dataclasses import dataclass
from functools import partial

from django.conf import settings

from approvals import calls, policy, routing, rules
from approvals.services import decide_by_rule, reject_as_repeat, request_approval
from hitl.inputs import has_surrogate
from hitl.visible import reveal

from .models import Conversation, ToolCall
from .tools import OutsideTool, Preview, ToolArgumentsError, ToolContext, ToolSpec, arguments_hash, registry

logger = logging.getLogger(__name__)

MAX_RAW_ARGUMENTS = 100_000


@dataclass(frozen=True)
class GatedCall:
    arguments: dict
    arguments_hash: str
    gate: policy.Gate
    preview: Preview | None = None
    confirmation_hint: str = ""
    kind: str = "action"  # or "question", "plan": the agent asks a human (approvals.pauses)
    request: dict | None = None  # the question or the plan, as stored
    annotations: dict | None = None  # the tool's source's hints (an MCP server's), stored with the approval

    @property
    def stored_preview(self) -> dict | None:
        return {"kind": self.preview.kind, "text": self.preview.text} if self.preview else None


def tool_context(conversation: Conversation, idempotency_key: str = "") -> ToolContext:
    return ToolContext(
        conversation_id=str(conversation.pk),
        agent=conversation.agent,
        sandbox=settings.HITL_SANDBOX_ROOT / str(conversation.pk),
        idempotency_key=idempotency_key,
    )


def parse_arguments(spec: ToolSpec, raw: str) -> dict:
    """The model's raw argument text, parsed and validated; errors are written for the model."""
    if len(raw) > MAX_RAW_ARGUMENTS:
        raise ToolArgumentsError(f"Arguments for {spec.name} are too large ({len(raw)} characters).")
    if "\\u0000" in raw.lower():
        raise ToolArgumentsError(f"Arguments for {spec.name} contain a NUL character.")
    try:
        parsed = json.loads(raw or "{}")
    except ValueError as exc:
        raise ToolArgumentsError(f"Arguments for {spec.name} are not valid JSON ({exc}).") from None
    except RecursionError:
        raise ToolArgumentsError(f"Arguments for {spec.name} are nested too deeply.") from None
    if has_surrogate(parsed):
        raise ToolArgumentsError(f"Arguments for {spec.name} contain a lone UTF-16 surrogate.")
    return spec.validate(parsed)


def gate_call(spec: ToolSpec, arguments: dict, conversation: Conversation, *, with_preview: bool = True) -> GatedCall:
    """Gate validated arguments; a gated call also gets its preview (unless not `with_preview`: a
    call that runs elsewhere, whose world ours is not) and, when critical, its hint."""
    context = tool_context(conversation)
    digest = arguments_hash(arguments)
    if spec.pause:
        return GatedCall(arguments, digest, pause_gate(spec, conversation), kind=spec.pause, request=spec.pause_request(arguments))
    try:
        gate = policy.check(spec, arguments, conversation.agent, context)
    except Exception as exc:  # a broken rule must fail closed: ask a human
        logger.exception("approval rule of %s failed", spec.name)
        gate = policy.Gate(True, f"The approval rule for {spec.name} failed ({exc.__class__.__name__}).", spec.risk)
    if not gate.required:
        return GatedCall(arguments, digest, gate)
    hint = confirmation_hint(spec, arguments, digest) if gate.risk == "critical" else ""
    preview = preview_of(spec, arguments, context) if with_preview else None
    return GatedCall(arguments, digest, gate, preview, hint, annotations=spec.annotations)


def pause_gate(spec: ToolSpec, conversation: Conversation) -> policy.Gate:
    """A question or a plan always waits, for its owner (or an approver who may see it), whatever the
    risk rules say of actions; it expires as the agent's approvals do."""
    asks = "a question" if spec.pause == "question" else "a plan to approve"
    return policy.Gate(
        True, f"{conversation.agent.name} asks you {asks}.", "low", timeout_seconds=conversation.agent.approval_timeout_seconds
    )


def preview_of(spec: ToolSpec, arguments: dict, context: ToolContext) -> Preview | None:
    """The tool's preview; one that fails says so (the call stays gated, shown by its arguments)."""
    try:
        return spec.preview_of(arguments, context)
    except Exception as exc:
        logger.warning("preview of %s failed: %r", spec.name, exc)
        return Preview("text", reveal(f"No preview: {exc}"[:500]), state=f"error:{exc.__class__.__name__}")


def confirmation_hint(spec: ToolSpec, arguments: dict, digest: str) -> str:
    """What to type: the tool's own word for it (the target), or a short code of these arguments."""
    hint = spec.confirmation(arguments) if spec.confirmation else ""
    return (hint or digest[:6]).strip()[:200]


class EditChecker:
    """approvals' CallChecker: an edit is validated and gated exactly like the model's call."""

    def check(self, approval, arguments) -> calls.CheckedCall:
        conversation = Conversation.objects.select_related("agent").get(pk=approval.conversation_id)
        spec = self._spec(approval, conversation)
        if spec is None:
            raise calls.InvalidArguments("This tool is no longer available to the agent.")
        if spec.pause:
            raise calls.InvalidArguments(f"A {spec.pause} is answered, not edited.")
        try:
            validated = spec.validate(arguments)
        except ToolArgumentsError as exc:
            raise calls.InvalidArguments(str(exc)) from None
        # An approval request's call runs where its caller is: the edit is shown by its arguments.
        gated = gate_call(spec, validated, conversation, with_preview=conversation.source != Conversation.Source.API)
        gate = gated.gate
        return calls.CheckedCall(
            arguments=validated,
            arguments_hash=gated.arguments_hash,
            reason=gate.reason,
            risk=gate.risk,
            approver_required=gate.approver_required,
            preview=gated.stored_preview,
            preview_state=gated.preview.state if gated.preview else "",
            confirmation_hint=gated.confirmation_hint or confirmation_hint(spec, validated, gated.arguments_hash),
        )

    def schema(self, approval) -> dict:
        conversation = Conversation.objects.select_related("agent").get(pk=approval.conversation_id)
        spec = registry.get(approval.tool_call.name) or registry.find(conversation.agent, approval.tool_call.name)
        return spec.parameters if spec else {}

    @staticmethod
    def _spec(approval, conversation: Conversation) -> ToolSpec | None:
        spec = registry.find(conversation.agent, approval.tool_call.name)
        if spec is None and conversation.source == Conversation.Source.API:
            return OutsideTool.named(approval.tool_call.name)  # a tool the agent does not have: the caller's
        return spec


def screen(call: ToolCall, gated: GatedCall, conversation: Conversation, live_rules: list, live_routes: list) -> tuple:
    """What decides a gated action besides a human, read before any write transaction: the route
    that says who approves it (approvals.routing.match), what the rules say of it (`live_rules`,
    rules.applicable(conversation)), and what its card would offer to remember. For the loop's
    calls and outside ones alike (chat.outside)."""
    route = routing.match(live_routes, tool=call.name, risk=gated.gate.risk)
    candidate = rule_call(call, gated, conversation, routed=route is not None)
    screening = rules.screen(live_rules, candidate, conversation_id=conversation.pk, arguments_hash=call.arguments_hash)
    suggestion = rules.suggestion(conversation, candidate, trust_after=conversation.agent.trust_after)
    return screening, suggestion, route


def rule_call(call: ToolCall, gated: GatedCall, conversation: Conversation, *, routed: bool = False) -> rules.Call:
    # A routed call needs its route's approvers: no allow rule approves it (a deny rule still rejects it).
    return rules.Call(
        tool=call.name, arguments=call.arguments, risk=gated.gate.risk, approver_required=gated.gate.approver_required or routed,
        max_auto_approve_risk=conversation.agent.max_auto_approve_risk,
    )


def automatic_decision(screening: rules.Screening):
    """How the call is decided at once, if it is, in this order, a human's say winning over a saved
    allow: a deny rule rejects it; the same call, just rejected in this conversation, is rejected
    again (the rejection contract); an allow rule approves it (approvals.rules). Else None: a human
    decides, perhaps offered a trust suggestion."""
    if rule := rules.first_deny(screening):
        return partial(decide_by_rule, rule=rule)
    if earlier := screening.repeats:
        return partial(reject_as_repeat, earlier=earlier)
    if rule := rules.first_allow(screening):
        return partial(decide_by_rule, rule=rule)
    return None


def request(call: ToolCall, gated: GatedCall, conversation: Conversation, *, suggestion: dict | None, route):
    """The saved gated call's approval, in the caller's transaction, as the gate, its preview and
    its route say (approvals.services.request_approval)."""
    return request_approval(
        tool_call_id=call.pk,
        conversation_id=conversation.pk,
        requested_by_id=conversation.owner_id,
        reason=gated.gate.reason,
        risk=gated.gate.risk,
        arguments_hash=call.arguments_hash,
        approver_required=gated.gate.approver_required,
        timeout_seconds=gated.gate.timeout_seconds,
        preview=gated.stored_preview,
        preview_state=gated.preview.state if gated.preview else "",
        confirmation_hint=gated.confirmation_hint,
        kind=gated.kind,
        request=gated.request,
        rule_suggestion=suggestion,
        annotations=gated.annotations,
        route=route,
    )
