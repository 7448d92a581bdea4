from dataclasses import dataclass, field

from approvals.policy import check
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
