"""Validating and gating one call, for a model's call (the loop) and a human's edit (approvals):
the tool's schema, the policy, the preview and what a human types to approve a critical call."""
import json
import logging
from dataclasses import dataclass

from django.conf import settings

from approvals import calls, policy
from hitl.inputs import has_surrogate
from hitl.visible import reveal

from .models import Conversation
from .tools import Preview, ToolArgumentsError, ToolContext, ToolSpec, arguments_hash, registry

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


def gate_call(spec: ToolSpec, arguments: dict, conversation: Conversation) -> GatedCall:
    """Gate validated arguments; a gated call also gets its preview and, when critical, its hint."""
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
    return GatedCall(arguments, digest, gate, preview_of(spec, arguments, context), hint, annotations=spec.annotations)


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
        gated = gate_call(spec, validated, conversation)
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
        return registry.find(conversation.agent, approval.tool_call.name)
