"""Validating and gating one call, for a model's call (the loop) and a human's edit (approvals):
the tool's schema, the policy, the preview and what a human types to approve a critical call."""
import json
import logging
from dataclasses import dataclass, replace
from functools import partial

from django.conf import settings

from approvals import reviewer
from approvals.deciders import routing
from approvals.policy import calls, explain, gate as policy, rules
from approvals.services import decide_by_rule, reject_as_repeat, request_approval
from core.inputs import has_surrogate, is_storable_value
from core.visible import reveal

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
    steps: tuple = ()  # the gate's part of the explanation (approvals.policy.explain)
    rules_only: bool = False  # the policy would run it: a deny or ask rule (or always-ask pattern) holds it (hold)
    outside_plan: bool = False  # an approved plan holds the conversation, and no approved step calls it (chat.planned)
    spec: ToolSpec | None = None

    @property
    def stored_preview(self) -> dict | None:
        return {"kind": self.preview.kind, "text": self.preview.text} if self.preview else None


def tool_context(conversation: Conversation, idempotency_key: str = "", call: ToolCall | None = None) -> ToolContext:
    """`call`: the running call, whose tool may record what it starts elsewhere (ToolContext.started)."""
    return ToolContext(
        conversation_id=str(conversation.pk),
        agent=conversation.agent,
        sandbox=settings.HITL_SANDBOX_ROOT / str(conversation.pk),
        idempotency_key=idempotency_key,
        started=partial(_record_started, call.pk) if call is not None else None,
    )


def _record_started(call_id: int, state: dict) -> bool:
    """Keep what a running call started elsewhere on it (input_state), unless a Stop ended it meanwhile."""
    return bool(ToolCall.objects.filter(pk=call_id, status=ToolCall.Status.RUNNING).update(input_state=state))


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
    agent = conversation.agent
    if spec.pause:
        gate = pause_gate(spec, conversation)
        steps = tuple(explain.gate(spec, agent, gate, arguments))
        return GatedCall(arguments, digest, gate, kind=spec.pause, request=spec.pause_request(arguments), steps=steps, spec=spec)
    failed = False
    try:
        gate = policy.check(spec, arguments, agent, context)
    except Exception as exc:  # a broken rule must fail closed: ask a human
        logger.exception("approval rule of %s failed", spec.name)
        gate, failed = policy.Gate(True, f"The approval rule for {spec.name} failed ({exc.__class__.__name__}).", spec.risk), True
    steps = tuple(explain.gate(spec, agent, gate, arguments, failed=failed))
    if not gate.required:
        return GatedCall(arguments, digest, gate, steps=steps, spec=spec)
    hint = confirmation_hint(spec, arguments, digest) if gate.risk == "critical" else ""
    preview = preview_of(spec, arguments, context) if with_preview else None
    return GatedCall(arguments, digest, gate, preview, hint, annotations=spec.annotations, steps=steps, spec=spec)


def hold(call: ToolCall, gated: GatedCall, conversation: Conversation, live_rules: list, *, with_preview: bool = True) -> GatedCall:
    """An action the policy would run, as the rules hold it: if a deny or ask rule, or one of the
    agent's always-ask patterns, matches it (read before any write transaction, as every screening
    is), gated as the policy gates a call it asks about (risk, four eyes, timeout, preview, hint), to
    be screened and stored with an approval; else `gated` as it was: it runs. Pure but the preview."""
    spec = gated.spec
    if gated.gate.required or gated.kind != "action" or spec is None:
        return gated
    candidate = rule_call(call, gated, conversation)
    if not rules.would_hold(live_rules, candidate):
        return gated
    agent = conversation.agent
    asked = policy.check(replace(spec, needs_approval=True, risk=gated.gate.risk), gated.arguments, agent)
    gate = policy.Gate(True, "", asked.risk, asked.approver_required, asked.timeout_seconds, asked.timeout_action)
    hint = confirmation_hint(spec, gated.arguments, gated.arguments_hash) if gate.risk == "critical" else ""
    preview = gated.preview or (preview_of(spec, gated.arguments, tool_context(conversation)) if with_preview else None)
    steps = gated.steps + tuple(explain.weighed(gate, agent, spec, gated.arguments))
    return replace(gated, gate=gate, preview=preview, confirmation_hint=hint, annotations=spec.annotations, steps=steps, rules_only=True)


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
        if approval.tool_call.undo_of_id is not None:
            raise calls.InvalidArguments("An undo is approved or rejected, not edited: it puts back what its call kept.")
        spec = self._spec(approval, conversation)
        if spec is None:
            raise calls.InvalidArguments("This tool is no longer available to the agent.")
        if spec.pause:
            raise calls.InvalidArguments(f"A {spec.pause} is answered, not edited.")
        if not is_storable_value(arguments):  # from any surface: PostgreSQL refuses a NUL, no driver encodes a lone surrogate
            raise calls.InvalidArguments("The arguments contain a NUL character or a lone UTF-16 surrogate, which is not text.")
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
        if approval.tool_call.asked_by_id is not None:
            return OutsideTool.named(approval.tool_call.name)  # a call a tool asked for (chat.asked): never ours, checked where it runs
        spec = registry.find(conversation.agent, approval.tool_call.name)
        if spec is None and conversation.source == Conversation.Source.API:
            return OutsideTool.named(approval.tool_call.name)  # a tool the agent does not have: the caller's
        return spec


def screen(call: ToolCall, gated: GatedCall, conversation: Conversation, live_rules: list, live_routes: list) -> tuple:
    """What decides a gated action (or one the rules hold: hold) besides a human, read before any
    write transaction: the route that says who approves it (approvals.deciders.routing.match), what the rules
    say of it (`live_rules`, rules.applicable(conversation, recently_expired=True)), and what its
    card would offer to remember. For the loop's calls and outside ones alike (chat.outside)."""
    route = routing.match(live_routes, tool=call.name, risk=gated.gate.risk)
    candidate = rule_call(call, gated, conversation, routed=route is not None)
    screening = rules.screen(
        live_rules, candidate, conversation_id=conversation.pk, arguments_hash=call.arguments_hash, gated=not gated.rules_only
    )
    suggestion = rules.suggestion(conversation, candidate, trust_after=conversation.agent.trust_after)
    if screening.asks or gated.rules_only or gated.outside_plan:  # an ask beats any allow: "Always allow" would change nothing
        suggestion = {**suggestion, "may_allow": False, "trusted": 0}
    return screening, suggestion, route


def rule_call(call: ToolCall, gated: GatedCall, conversation: Conversation, *, routed: bool = False) -> rules.Call:
    # A routed call needs its route's approvers: no allow rule approves it (a deny rule still rejects it).
    agent = conversation.agent
    return rules.Call(
        tool=call.name, arguments=call.arguments, risk=gated.gate.risk, approver_required=gated.gate.approver_required or routed,
        max_auto_approve_risk=agent.max_auto_approve_risk, always_ask=rules.patterns_for(agent.always_ask, call.name),
        routed=routed and not gated.gate.approver_required, step_up_from_risk=agent.step_up_from_risk,
        outside_plan=gated.outside_plan,
    )


def automatic_decision(applied: rules.Applied):
    """How the call is decided at once, if it is, as the rules applied in their order say
    (rules.apply: deny → repeat → ask → allow, a human's say winning over a saved allow): a deny
    rule rejects it; the same call, just rejected in this conversation, is rejected again (the
    rejection contract); an allow rule approves it. Else None: a human decides (an ask rule's or
    pattern's call, or a gated call no rule decided), perhaps offered a trust suggestion."""
    if applied.effect in (rules.DENY, rules.ALLOW):
        return partial(decide_by_rule, rule=applied.rule)
    if applied.effect == rules.REPEAT:
        return partial(reject_as_repeat, earlier=applied.earlier)
    return None


def explained(gated: GatedCall, screening, applied: rules.Applied, route, conversation: Conversation, *, by_policy: bool = False) -> list[dict]:
    """The call's decision path as it was applied (approvals.policy.explain), stored with its approval."""
    return explain.path(
        list(gated.steps), screening, applied, route, agent_name=conversation.agent.name, by_policy=by_policy,
        routed=screening is not None,
    )


def reviewed_by(call: ToolCall, gated: GatedCall, conversation: Conversation, applied: rules.Applied, route) -> str:
    """The agent's AI reviewer model if the call goes to it first (approvals.reviewer.may_review):
    no rule decided or asks about it (`applied`), and nothing sends it to a person. Else ""."""
    agent = conversation.agent
    if not agent.reviewer_model or applied.effect:
        return ""
    barrier = rules.barrier(rule_call(call, gated, conversation, routed=route is not None))
    asked = gated.rules_only or gated.outside_plan
    return agent.reviewer_model if reviewer.may_review(agent, kind=gated.kind, risk=gated.gate.risk, barrier=barrier, asked=asked) else ""


def request(
    call: ToolCall, gated: GatedCall, conversation: Conversation, *, suggestion: dict | None, route,
    applied: rules.Applied | None = None, explanation: list | None = None,
):
    """The saved gated call's approval, in the caller's transaction, as the gate, its preview, its
    route and the rules (an ask rule is named on it, `rule`) say (approvals.services.request_approval)."""
    applied = applied or rules.Applied()
    reason = gated.gate.reason
    if applied.effect == rules.ASK:
        asked = rules.ask_reason(applied.asked, conversation.agent.name, call.name)
        reason = f"{reason} {asked}" if reason else asked
    elif gated.rules_only and applied.effect == rules.DENY:
        reason = reason or rules.denial_reason(applied.rule)
    elif gated.rules_only:
        reason = reason or f"A rule holds {call.name}, which {conversation.agent.name}'s policy would run."
    return request_approval(
        review_by=reviewed_by(call, gated, conversation, applied, route),
        tool_call_id=call.pk,
        conversation_id=conversation.pk,
        requested_by_id=conversation.owner_id,
        reason=reason,
        risk=gated.gate.risk,
        arguments_hash=call.arguments_hash,
        approver_required=gated.gate.approver_required,
        timeout_seconds=gated.gate.timeout_seconds,
        timeout_action=gated.gate.timeout_action,
        preview=gated.stored_preview,
        preview_state=gated.preview.state if gated.preview else "",
        confirmation_hint=gated.confirmation_hint,
        kind=gated.kind,
        request=gated.request,
        rule_suggestion=suggestion,
        annotations=gated.annotations,
        route=route,
        rule=applied.rule if applied.effect == rules.ASK else None,
        explanation=explanation,
    )
