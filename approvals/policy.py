"""The one place that decides whether a tool call needs a human: pure, no database."""
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Gate:
    required: bool
    reason: str
    risk: str


def check(tool_spec: Any, arguments: dict, agent: Any, context: Any = None) -> Gate:
    """Gate one validated call. Agent-wide rules come first, then the tool's own flag or function.

    `tool_spec` has `name`, `risk` and `needs_approval` (a bool, or a function of the arguments and
    context returning `(required, reason)`); `agent` has `name`, `require_approval` and
    `all_tools_need_approval`.
    """
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
