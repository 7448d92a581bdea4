"""The one place that decides whether a tool call needs a human, and which human: pure, no database."""
from dataclasses import dataclass, replace
from typing import Any

RISKS = ("low", "medium", "high", "critical")


@dataclass(frozen=True)
class Gate:
    required: bool
    reason: str
    risk: str
    approver_required: bool = False  # the owner may not decide it: an approver who is not the owner must
    timeout_seconds: int | None = None  # how long it may stay pending before it expires


def check(tool_spec: Any, arguments: dict, agent: Any, context: Any = None) -> Gate:
    """Gate one validated call. Agent-wide rules come first, then the tool's own flag or function.

    `tool_spec` has `name`, `risk`, `approval_timeout` and `needs_approval` (a bool, or a function of
    the arguments and context returning `(required, reason)`); `agent` has `name`,
    `require_approval`, `all_tools_need_approval`, `owner_max_risk` and `approval_timeout_seconds`.
    """
    gate = _needs_approval(tool_spec, arguments, agent, context)
    if not gate.required:
        return gate
    return replace(
        gate,
        approver_required=RISKS.index(gate.risk) > RISKS.index(agent.owner_max_risk),
        timeout_seconds=tool_spec.approval_timeout or agent.approval_timeout_seconds,
    )


def _needs_approval(tool_spec: Any, arguments: dict, agent: Any, context: Any) -> Gate:
    risk = tool_spec.risk
    if agent.all_tools_need_approval:
        return Gate(True, f"{agent.name} needs approval for every tool call.", risk)
    if tool_spec.name in agent.require_approval:
        return Gate(True, f"{agent.name} needs approval for {tool_spec.name}.", risk)
    rule = tool_spec.needs_approval
    if callable(rule):
        required, reason = rule(arguments, context)
        return Gate(bool(required), reason if required else "", risk)
    if rule:
        return Gate(True, f"{tool_spec.name} always needs approval ({risk} risk).", risk)
    return Gate(False, "", risk)
