"""export_policy / import_policy: the policy as a YAML file, a dry run that changes nothing, --apply
as one policy version, and bad files refused with nothing changed."""
from io import StringIO

import pytest
import yaml
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals.models import PolicyVersion, Route, Rule
from chat.models import Agent
from toolservers.models import AgentToolServer, ToolPin, ToolServer


@pytest.fixture
def seeded(agent, alice, bob):
    """A policy with something of every kind: an agent's gate and access, standing rules, a route,
    a trusted tool server with a pin and a link."""
    leads = Group.objects.create(name="leads")
    agent.max_auto_approve_risk = "low"
    agent.always_ask = {"run_command": ["sudo *"]}
    agent.save()
    agent.allowed_users.add(alice)
    Rule.objects.create(effect="deny", tool="read_file", arguments={"path": "secrets/*"}, scope="agent", agent=agent, created_by=bob)
    Rule.objects.create(effect="allow", tool="calculator", scope="global", created_by=bob, note="sums are safe")
    Rule.objects.create(effect="allow", tool="write_file", scope="agent_user", agent=agent, created_by=alice, max_uses=3)
    route = Route.objects.create(agent=agent, tool="delete_file", min_risk="medium", quorum=1)
    route.approvers.set([leads])
    server = ToolServer.objects.create(name="notes", command="true", trusted=True)
    ToolPin.objects.create(server=server, name="search", definition_hash="a" * 64)
    AgentToolServer.objects.create(agent=agent, server=server, require_approval=["search"])
    return agent


def export() -> str:
    out = StringIO()
    call_command("export_policy", stdout=out)
    return out.getvalue()


def import_policy(path, *args) -> str:
    out = StringIO()
    call_command("import_policy", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_export_writes_every_kind_of_policy_with_natural_keys(seeded):
    document = yaml.safe_load(export())

    [agent] = document["agents"]
    assert agent["slug"] == seeded.slug and agent["max_auto_approve_risk"] == "low"
    assert agent["access"] == {"open_to_everyone": seeded.open_to_everyone, "users": ["alice"], "groups": []}
    assert {(r["effect"], r["tool"], r["agent"], r["user"]) for r in document["rules"]} == {
        ("deny", "read_file", seeded.slug, "bob"), ("allow", "calculator", None, "bob"), ("allow", "write_file", seeded.slug, "alice"),
    }
    assert document["routes"][0]["approvers"] == ["leads"] and document["routes"][0]["agent"] == seeded.slug
    assert document["tool_servers"] == [{"name": "notes", "enabled": True, "trusted": True, "pins": [{"tool": "search", "definition_hash": "a" * 64}]}]
    assert document["agent_tool_servers"][0]["server"] == "notes"
    assert export() == export()  # a stable order


def test_export_then_import_is_a_no_op(seeded, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(export())
    versions = PolicyVersion.objects.count()

    assert import_policy(path).strip() == "no changes"
    assert import_policy(path, "--apply").strip() == "no changes"
    assert PolicyVersion.objects.count() == versions


def test_a_dry_run_prints_the_differences_and_changes_nothing(seeded, tmp_path):
    document = yaml.safe_load(export())
    document["agents"][0]["max_auto_approve_risk"] = "medium"
    document["rules"] = [r for r in document["rules"] if r["tool"] != "calculator"]
    document["rules"].append({"effect": "ask", "tool": "run_command", "scope": "agent", "agent": seeded.slug, "user": "bob"})
    document["tool_servers"][0]["trusted"] = False
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(document))
    versions = PolicyVersion.objects.count()

    printed = import_policy(path)

    assert f'~ agent {seeded.slug}: max_auto_approve_risk: "low" → "medium"' in printed
    assert "- rule #" in printed and "allow calculator" in printed and "+ rule: ask run_command" in printed
    assert "~ tool server notes: trusted: true → false" in printed and "dry run" in printed
    assert Agent.objects.get(pk=seeded.pk).max_auto_approve_risk == "low"
    assert Rule.objects.filter(tool="calculator", enabled=True).exists() and not Rule.objects.filter(tool="run_command").exists()
    assert ToolServer.objects.get(name="notes").trusted and PolicyVersion.objects.count() == versions


def test_apply_makes_the_changes_as_one_policy_version(seeded, tmp_path, bob):
    document = yaml.safe_load(export())
    document["agents"][0]["max_auto_approve_risk"] = "medium"
    document["rules"] = [r for r in document["rules"] if r["tool"] != "calculator"]
    document["rules"].append({"effect": "ask", "tool": "run_command", "scope": "agent", "agent": seeded.slug, "user": "bob"})
    document["routes"][0]["quorum"] = 2
    document["tool_servers"][0]["trusted"] = False
    document["agent_tool_servers"] = []
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(document))
    before = PolicyVersion.objects.count()

    import_policy(path, "--apply", "--by", "bob")

    assert Agent.objects.get(pk=seeded.pk).max_auto_approve_risk == "medium"
    assert not Rule.objects.get(tool="calculator").enabled
    assert Rule.objects.get(tool="run_command").effect == "ask"
    assert Route.objects.get(deleted_at__isnull=True).quorum == 2 and Route.objects.filter(deleted_at__isnull=False).count() == 1
    assert not ToolServer.objects.get(name="notes").trusted and not AgentToolServer.objects.exists()
    assert PolicyVersion.objects.count() == before + 1
    version = PolicyVersion.objects.first()
    assert version.created_by == bob and version.note == f"import_policy {path}"
    assert {change["model"] for change in version.changes} >= {"chat.agent", "approvals.rule", "approvals.route", "toolservers.toolserver", "toolservers.agenttoolserver"}
    path.write_text(export())
    assert import_policy(path).strip() == "no changes"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("agents: [\n  {slug: x\n", "line 3"),
        ("agentz: []\n", "unknown section 'agentz'"),
        ("agents:\n  - slug: nobody\n", "line 2 (agents[0]): slug: unknown agent 'nobody'"),
        ("rules:\n  - {effect: allow, tool: x, scope: global, user: ghost}\n", "user: unknown user 'ghost'"),
        ("rules:\n  - {effect: maybe, tool: x, scope: global, user: bob}\n", "effect is allow, deny or ask"),
        ("rules:\n  - {effect: allow, tool: x, scope: conversation, user: bob}\n", "a conversation's rules stay with it"),
        ("rules:\n  - {efect: allow, tool: x, scope: global, user: bob}\n", "unknown key 'efect'"),
        ("routes:\n  - {agent: demo, approvers: [nobody]}\n", "Unknown group 'nobody'"),
        ("tool_servers:\n  - {name: elsewhere, trusted: true}\n", "unknown tool server 'elsewhere'"),
        ("- just a list\n", "the file is a mapping of sections"),
    ],
)
def test_a_bad_file_is_refused_naming_where_and_nothing_changes(seeded, tmp_path, text, error):
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    versions = PolicyVersion.objects.count()
    rules = list(Rule.objects.values_list("id", "enabled"))

    with pytest.raises(CommandError) as refused:
        import_policy(path, "--apply")

    assert error in str(refused.value) and "nothing changed" in str(refused.value)
    assert PolicyVersion.objects.count() == versions and list(Rule.objects.values_list("id", "enabled")) == rules


def test_a_bad_value_of_an_agent_is_refused_by_name(seeded, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(f"agents:\n  - slug: {seeded.slug}\n    owner_max_risk: extreme\n")

    with pytest.raises(CommandError, match="owner_max_risk"):
        import_policy(path, "--apply")

    assert Agent.objects.get(pk=seeded.pk).owner_max_risk == seeded.owner_max_risk


def test_a_missing_file_is_a_clear_error(db, tmp_path):
    with pytest.raises(CommandError, match="No such file"):
        import_policy(tmp_path / "nowhere.yaml")


def test_yaml_that_would_run_code_is_refused(seeded, tmp_path):
    path = tmp_path / "policy.yaml"
    marker = tmp_path / "ran"
    path.write_text(f'agents: !!python/object/apply:os.system ["touch {marker}"]\n')

    with pytest.raises(CommandError, match="line 1: not valid YAML"):
        import_policy(path, "--apply")

    assert not marker.exists()


def test_a_file_that_is_not_text_or_names_an_unknown_author_is_refused(seeded, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_bytes(b"\xff\xfe\x00agents")
    with pytest.raises(CommandError, match="policy.yaml"):
        import_policy(path)
    path.write_text(export())
    with pytest.raises(CommandError, match="--by: unknown user 'ghost'"):
        import_policy(path, "--apply", "--by", "ghost")


def test_a_conversation_rule_is_left_alone_and_a_missing_section_too(seeded, tmp_path, alice, make_conversation):
    conversation = make_conversation(alice)
    kept = Rule.objects.create(effect="allow", tool="write_file", scope="conversation", conversation=conversation, created_by=alice)
    path = tmp_path / "policy.yaml"
    path.write_text("rules: []\n")

    printed = import_policy(path, "--apply")

    assert printed.count("- rule #") == 3 and Rule.objects.get(pk=kept.pk).enabled
    assert Route.objects.filter(deleted_at__isnull=True).exists() and AgentToolServer.objects.exists()  # not in the file: as they were
