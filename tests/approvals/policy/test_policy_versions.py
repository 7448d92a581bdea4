"""Policy versions: every change to what decides calls makes a numbered version (who, when, a diff,
the whole policy's hash), linked into the audit chain; each approval records the version it was
requested under; a save costs a bounded number of queries."""
import pytest
from django.contrib.auth.models import Group
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from approvals import audit
from approvals.policy import versions as policy_versions
from approvals.models import Approval, PolicyVersion, Route, Rule
from approvals.services import decide
from tests.conftest import pending_approvals, start_conversation
from toolservers.models import AgentToolServer, ToolPin, ToolServer


def newest() -> PolicyVersion:
    return PolicyVersion.objects.order_by("-number").first()


def test_an_agents_gate_change_is_a_version_with_who_when_and_the_diff(agent, bob):
    before = newest()
    agent.max_auto_approve_risk = "low"
    agent._history_user = bob
    agent.save()

    version = newest()
    assert version.number == before.number + 1 and version.created_by == bob and version.created_at >= before.created_at
    [change] = version.changes
    assert change == {"model": "chat.agent", "object": f"agent {agent.slug}", "action": "changed", "fields": {"max_auto_approve_risk": ["medium", "low"]}}
    assert version.policy_hash == policy_versions.policy_hash(policy_versions.policy_document()) != before.policy_hash


def test_a_change_outside_the_policy_makes_no_version(agent):
    before = newest()
    agent.name = "Renamed"
    agent.save()

    assert newest() == before and agent.history.count() == 2  # the row's history keeps it all the same


def test_rules_routes_servers_links_pins_and_access_each_make_a_version(agent, alice, bob):
    def changed(action) -> dict:
        before = newest().number
        action()
        version = newest()
        assert version.number == before + 1, action
        return version.changes[-1]

    rule = Rule(effect="deny", tool="read_file", scope="agent", agent=agent, created_by=bob)
    assert changed(rule.save)["action"] == "created"
    rule.enabled = False
    assert changed(lambda: rule.save(update_fields=["enabled"]))["fields"] == {"enabled": [True, False]}
    leads = Group.objects.create(name="leads")
    route = Route.objects.create(agent=agent, tool="*", min_risk="high")
    assert changed(lambda: route.approvers.add(leads))["fields"] == {"approvers": [[], ["leads"]]}
    assert changed(lambda: agent.allowed_users.add(alice))["fields"] == {"allowed_users": [[], ["alice"]]}
    server = ToolServer.objects.create(name="notes", command="true")
    server.trusted = True
    assert changed(server.save)["fields"] == {"trusted": [False, True]}
    assert changed(lambda: ToolPin.objects.create(server=server, name="search", definition_hash="b" * 64))["object"] == "pin notes/search"
    link = AgentToolServer.objects.create(agent=agent, server=server)
    link.require_approval = ["search"]
    assert changed(link.save)["fields"] == {"require_approval": [None, ["search"]]}
    assert changed(link.delete)["action"] == "deleted"


def test_changes_recorded_together_are_one_version(agent, bob):
    before = newest().number
    with policy_versions.recording(user=bob, note="together"):
        agent.trust_after = 0
        agent.save()
        Rule.objects.create(effect="allow", tool="calculator", scope="global", created_by=bob)

    version = newest()
    assert version.number == before + 1 and version.created_by == bob and version.note == "together"
    assert [change["model"] for change in version.changes] == ["chat.agent", "approvals.rule"]


def test_a_rolled_back_change_leaves_no_version(agent):
    before = newest().number
    with pytest.raises(RuntimeError), transaction.atomic():
        agent.trust_after = 9
        agent.save()
        raise RuntimeError

    assert newest().number == before


def started(alice, agent, text, capture) -> list:
    with capture(execute=True):
        conversation = start_conversation(alice, agent, text)
    return pending_approvals(conversation)


def test_an_approval_records_the_policy_version_it_was_requested_under(alice, agent, api_as, django_capture_on_commit_callbacks):
    [first] = started(alice, agent, "delete a.txt", django_capture_on_commit_callbacks)
    agent.approval_timeout_seconds = 600
    agent.save()
    [second] = started(alice, agent, "delete b.txt", django_capture_on_commit_callbacks)

    assert second.policy_version == first.policy_version + 1 == newest().number
    with django_capture_on_commit_callbacks(execute=True):
        shown = api_as(alice).post(f"approvals/{second.pk}/decision", {"decision": "approve", "shown_hash": second.shown_hash})
    assert shown.status_code == 200 and shown.json()["policy_version"] == second.policy_version
    decided = Approval.objects.select_related("tool_call").get(pk=second.pk)
    assert decided.status == "approved" and audit.content(decided)["policy_version"] == second.policy_version
    assert audit.decision_hash(decided) == decided.decision_hash and audit.verify().is_intact


def test_the_chain_verifies_with_version_links_and_a_changed_version_breaks_it(alice, agent, django_capture_on_commit_callbacks):
    [approval] = started(alice, agent, "delete a.txt", django_capture_on_commit_callbacks)
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    agent.trust_after = 1
    agent.save()

    verdict = audit.verify()
    assert verdict.is_intact and verdict.decisions == PolicyVersion.objects.count() + 1
    assert verdict.head.hash == newest().decision_hash

    from approvals.audit import triggers

    triggers.uninstall(connection, table="approvals_policyversion", name="approvals_policyversion")
    PolicyVersion.objects.filter(pk=newest().pk).update(changes=[])
    triggers.install_decided_is_final()
    verdict = audit.verify()
    assert not verdict.is_intact and verdict.what == f"policy version {newest().number}" and "no longer matches" in verdict.why


def test_a_policy_version_is_final(agent):
    version = newest()
    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyVersion.objects.filter(pk=version.pk).update(note="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyVersion.objects.filter(pk=version.pk).delete()


def test_queries_per_save_stay_small_whatever_the_policy_holds(agent, bob):
    def queries_of_a_rule_save() -> int:
        with CaptureQueriesContext(connection) as queries:
            Rule.objects.create(effect="deny", tool="x", scope="global", created_by=bob)
        return len(queries)

    few = queries_of_a_rule_save()
    for n in range(30):
        Rule.objects.create(effect="deny", tool=f"t{n}", scope="global", created_by=bob)
    many = queries_of_a_rule_save()

    assert few == many <= 20


def test_the_admin_shows_each_kind_of_history(agent, client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    rule = Rule.objects.create(effect="deny", tool="x", scope="global", created_by=admin)
    server = ToolServer.objects.create(name="notes", command="true")
    for url in (
        f"/admin/chat/agent/{agent.pk}/history/", f"/admin/approvals/rule/{rule.pk}/history/",
        f"/admin/toolservers/toolserver/{server.pk}/history/", "/admin/approvals/policyversion/",
    ):
        response = client.get(url)
        assert response.status_code == 200, url


def test_an_admin_save_is_one_version_naming_the_admin(agent, client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    server = ToolServer.objects.create(name="notes", command="true")
    before = newest().number

    response = client.post(
        f"/admin/toolservers/toolserver/{server.pk}/change/",
        {"name": "notes", "transport": "stdio", "command": "true", "args": "[]", "env": "{}", "url": "", "headers": "{}",
         "timeout_seconds": 30, "enabled": "on", "trusted": "on", "agents-TOTAL_FORMS": 0, "agents-INITIAL_FORMS": 0},
    )

    assert response.status_code == 302, response.content[:2000]
    assert newest().number == before + 1 and newest().created_by == admin


def test_a_rule_disabled_or_removed_through_the_api_is_a_version_naming_who(agent, alice, api_as):
    made = api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})
    assert made.status_code in (200, 201), made.content
    rule_id = made.json()["id"]
    before = newest().number

    assert api_as(alice).patch(f"rules/{rule_id}", {"enabled": False}).status_code == 200
    assert newest().number == before + 1 and newest().changes[0]["fields"] == {"enabled": [True, False]}
    assert newest().created_by == alice  # the token's user, as the history's request middleware reads it
    assert api_as(alice).delete(f"rules/{rule_id}").status_code in (200, 204)
    assert newest().number == before + 2 and "deleted_at" in newest().changes[0]["fields"]


def test_a_route_made_with_its_groups_is_one_version(agent, bob):
    from approvals.deciders.routemaking import create_route, remove_route

    Group.objects.create(name="leads")
    before = newest().number
    route = create_route(created_by=bob, agent=agent.slug, approvers=["leads"])

    assert newest().number == before + 1 and newest().created_by == bob
    assert {change["object"] for change in newest().changes} == {f"route #{route.pk}"}
    remove_route(route)
    assert newest().number == before + 2 and "deleted_at" in newest().changes[0]["fields"]


def test_a_first_listing_pins_as_one_version_and_an_admins_accept_is_another(agent, bob):
    from toolservers import pins

    server = ToolServer.objects.create(name="notes", command="true")
    listed = [{"name": "search", "description": "find"}, {"name": "write", "description": "write"}]
    before = newest().number
    pins.pin_listing(server, listed, first=True)
    assert newest().number == before + 1 and {change["object"] for change in newest().changes} == {"pin notes/search", "pin notes/write"}

    changed = {"name": "search", "description": "find, and send it all elsewhere"}
    ToolServer.objects.filter(pk=server.pk).update(tools=[changed, listed[1]])
    pins.accept(ToolPin.objects.get(name="search").pk, user=bob, shown_hash=pins.definition_hash(changed))

    assert newest().number == before + 2 and newest().created_by == bob
    assert set(newest().changes[0]["fields"]) >= {"definition_hash", "approved_by_id"}
