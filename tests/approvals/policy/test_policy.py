from dataclasses import dataclass, field, replace

from approvals.policy.gate import check
from chat.tools import ToolContext, registry


@dataclass
class AgentRules:
    name: str = "Agent"
    require_approval: list = field(default_factory=list)
    all_tools_need_approval: bool = False
    fetch_allowlist: list = field(default_factory=lambda: ["example.com"])
    owner_max_risk: str = "critical"
    approval_timeout_seconds: int | None = None


def test_tools_without_rules_are_not_gated():
    gate = check(registry.get("read_file"), {"path": "a"}, AgentRules())
    assert not gate.required and gate.risk == "low"


def test_static_flag_gates_with_the_tools_risk():
    gate = check(registry.get("delete_file"), {"path": "a"}, AgentRules())
    assert gate.required and gate.risk == "high" and "delete_file" in gate.reason


def test_agent_require_approval_list_gates():
    gate = check(registry.get("write_file"), {"path": "a", "content": ""}, AgentRules(require_approval=["write_file"]))
    assert gate.required and "write_file" in gate.reason


def test_all_tools_need_approval_gates_even_harmless_tools():
    gate = check(registry.get("calculator"), {"expression": "1+1"}, AgentRules(all_tools_need_approval=True))
    assert gate.required


def test_dynamic_gate_lets_allowlisted_domains_through_and_asks_for_others():
    agent = AgentRules()
    context = ToolContext(conversation_id="c", agent=agent, sandbox=None)
    spec = registry.get("web_fetch")
    assert not check(spec, {"url": "https://www.example.com/x"}, agent, context).required
    other = check(spec, {"url": "https://evil.example.org/"}, agent, context)
    assert other.required and "evil.example.org" in other.reason


def test_a_gate_function_may_set_the_risk_from_the_arguments():
    spec = replace(registry.get("web_fetch"), needs_approval=lambda arguments, context: (True, "internal host", "critical"))

    gate = check(spec, {"url": "https://intranet/"}, AgentRules(owner_max_risk="high"))

    assert (gate.required, gate.risk, gate.approver_required) == (True, "critical", True)


def test_the_risk_a_gate_function_sets_holds_where_the_agent_gates_the_tool_anyway():
    spec = replace(registry.get("web_fetch"), needs_approval=lambda arguments, context: (False, "", "high"))

    gate = check(spec, {"url": "https://example.com/"}, AgentRules(require_approval=["web_fetch"]))

    assert gate.required and gate.risk == "high"


def test_invisible_characters_raise_a_gated_calls_risk_one_level():
    plain = check(registry.get("send_email"), {"to": "bob@example.com", "subject": "hi"}, AgentRules())
    spoofed = check(registry.get("send_email"), {"to": "bob@\u202emoc.elpmaxe", "subject": "hi"}, AgentRules())

    assert (plain.risk, spoofed.risk) == ("high", "critical")
    assert "invisible or direction-changing characters" in spoofed.reason
