"""The one place that decides whether a tool call needs a human, and which human: pure, no database."""
from dataclasses import dataclass, replace
from typing import Any

from core.visible import has_invisible

from . import timeouts

RISKS = ("low", "medium", "high", "critical")


@dataclass(frozen=True)
class Gate:
    required: bool
    reason: str
    risk: str
    approver_required: bool = False  # the owner may not decide it: an approver who is not the owner must
    timeout_seconds: int | None = None  # how long it may stay pending before its deadline
    timeout_action: str = "expire"  # what the deadline does if no one decided (approvals.policy.timeouts)


def check(tool_spec: Any, arguments: dict, agent: Any, context: Any = None) -> Gate:
    """Gate one validated call. Agent-wide rules come first, then the tool's own flag or function.

    `tool_spec` has `name`, `risk`, `approval_timeout` and `needs_approval` (a bool, or a function of
    the arguments and context returning `(required, reason)` or `(required, reason, risk)`); `agent` has `name`,
    `require_approval`, `all_tools_need_approval`, `owner_max_risk`, `approval_timeout_seconds` and
    (optionally) `timeout_action` and `timeout_actions`.
    """
    gate = _needs_approval(tool_spec, arguments, agent, context)
    if not gate.required:
        return gate
    if has_invisible(arguments) or has_invisible(tool_spec.name):
        # What the human sees must be what runs: such characters are shown escaped, and the call
        # is treated as one level riskier (a spoofed address becomes critical: typed confirmation).
        gate = replace(
            gate,
            risk=raise_risk(gate.risk),
            reason=f"{gate.reason} Its arguments contain invisible or direction-changing characters.".strip(),
        )
    return replace(
        gate,
        approver_required=RISKS.index(gate.risk) > RISKS.index(agent.owner_max_risk),
        timeout_seconds=tool_spec.approval_timeout or agent.approval_timeout_seconds,
        timeout_action=timeouts.configured(agent, tool_spec.name),
    )


def raise_risk(risk: str) -> str:
    return RISKS[min(RISKS.index(risk) + 1, len(RISKS) - 1)]


def _needs_approval(tool_spec: Any, arguments: dict, agent: Any, context: Any) -> Gate:
    risk, rule = tool_spec.risk, tool_spec.needs_approval
    required, reason = bool(rule), f"{tool_spec.name} always needs approval ({risk} risk)."
    if callable(rule):
        # A gate function says whether, why, and (optionally) how risky, from the arguments; its
        # risk holds even where the agent's lists make the call gated anyway.
        required, reason, *rest = rule(arguments, context)
        risk = rest[0] if rest and rest[0] in RISKS else risk
    if agent.all_tools_need_approval:
        return Gate(True, f"{agent.name} needs approval for every tool call.", risk)
    if tool_spec.name in agent.require_approval:
        return Gate(True, f"{agent.name} needs approval for {tool_spec.name}.", risk)
    return Gate(bool(required), reason if required else "", risk)
