"""A change of policy the agent asks for, as a gated tool (issue 39, item 3: the TypeScript design's
`web-fetch.add-domain`): `add domain <domain>` waits for a human; its card says in words what the
change allows; approving stores a policy version naming the approval, after which a fetch of that
domain runs ungated; rejecting changes nothing; no allow rule ever approves it. The same for
`allow <tool> from now on` (allow_tool), which a tool that always asks never escapes."""
from types import SimpleNamespace

import pytest

from approvals import services as approval_services
from approvals.models import Approval, PolicyVersion, Rule
from approvals.policy import rulemaking
from chat import demo_tools
from chat.models import Agent, ToolCall
from tests.conftest import client_for, last_reply, only_pending, say, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)  # the loop runs (eagerly) on commit


@pytest.fixture
def fetched(monkeypatch):
    """web_fetch's network, stood in for: the URLs it was asked for."""
    urls = []

    def fetch(url, **options):
        urls.append(url)
        return SimpleNamespace(status_code=200, text="the vendor's docs", is_cut=False)

    monkeypatch.setattr(demo_tools.fetching, "fetch", fetch)
    return urls


def test_add_domain_waits_and_its_card_says_what_approving_allows(alice, agent):
    conversation = start(alice, agent, "add domain docs.vendor.test")
    approval = only_pending(conversation)

    assert (approval.tool_call.name, approval.tool_call.arguments, approval.risk) == ("add_domain", {"domain": "docs.vendor.test"}, "high")
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Let the agent fetch any page of docs.vendor.test without asking" in page
    assert "Approving stores a new policy version that names this approval; rejecting changes nothing." in page
    assert "docs.vendor.test" not in Agent.objects.get(pk=agent.pk).fetch_allowlist


def test_approved_it_stores_a_policy_version_naming_the_approval_and_the_next_fetch_runs_ungated(alice, agent, fetched):
    conversation = start(alice, agent, "add domain docs.vendor.test")
    approval = only_pending(conversation)
    before = PolicyVersion.objects.count()

    approval_services.decide(approval.pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash=approval.shown_hash)

    assert "docs.vendor.test" in Agent.objects.get(pk=agent.pk).fetch_allowlist
    version = PolicyVersion.objects.order_by("-number").first()
    assert PolicyVersion.objects.count() == before + 1
    assert version.note == f"add_domain docs.vendor.test: approved in approval #{approval.pk}" and version.created_by == alice
    assert f"(policy version {version.number}, from approval #{approval.pk})" in ToolCall.objects.get(pk=approval.tool_call_id).result

    say(conversation, alice, "fetch https://docs.vendor.test/x")

    call = ToolCall.objects.filter(message__conversation=conversation, name="web_fetch").get()
    assert (call.status, call.is_gated) == ("succeeded", False)
    assert not Approval.objects.filter(tool_call=call).exists()  # nobody was asked
    assert fetched == ["https://docs.vendor.test/x"]
    assert "the vendor's docs" in last_reply(conversation)


def test_rejected_it_changes_nothing_and_a_fetch_still_asks(alice, agent, fetched):
    conversation = start(alice, agent, "add domain docs.vendor.test")
    approval = only_pending(conversation)
    before = PolicyVersion.objects.count()

    approval_services.decide(approval.pk, user=alice, approve=False, via=Approval.Via.CHAT, shown_hash=approval.shown_hash, reason="no")
    say(conversation, alice, "fetch https://docs.vendor.test/x")

    assert "docs.vendor.test" not in Agent.objects.get(pk=agent.pk).fetch_allowlist
    assert PolicyVersion.objects.count() == before
    assert only_pending(conversation).tool_call.name == "web_fetch" and fetched == []


def test_no_allow_rule_approves_a_policy_change(alice, agent):
    rulemaking.create(alice, effect="allow", tool="add_domain", arguments={}, scope=Rule.Scope.AGENT_USER, agent=agent.slug)

    approval = only_pending(start(alice, agent, "add domain docs.vendor.test"))

    assert approval.status == Approval.Status.PENDING  # high risk: above what any rule may approve
    assert "docs.vendor.test" not in Agent.objects.get(pk=agent.pk).fetch_allowlist


@pytest.mark.parametrize("domain", ["https://docs.vendor.test", "docs.vendor.test/x", "localhost", "-bad.test", "a..test"])
def test_what_is_not_a_domain_goes_back_to_the_model_as_an_error(alice, agent, domain):
    conversation = start(alice, agent, f"add domain {domain}")

    call = ToolCall.objects.get(message__conversation=conversation, name="add_domain")
    assert call.status == "failed" and not Approval.objects.filter(tool_call=call).exists()


# --- "Allow this tool from now on": the same pattern for the agent's require_approval -------------


def test_allow_tool_approved_lets_the_tool_run_without_asking_and_stores_a_version(alice, agent):
    conversation = start(alice, agent, "allow write_file from now on")
    approval = only_pending(conversation)
    assert approval.tool_call.name == "allow_tool" and approval.risk == "high"
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Let the agent call write_file without asking, from now on" in page

    approval_services.decide(approval.pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash=approval.shown_hash)

    assert "write_file" not in Agent.objects.get(pk=agent.pk).require_approval
    assert PolicyVersion.objects.order_by("-number").first().note == f"allow_tool write_file: approved in approval #{approval.pk}"
    say(conversation, alice, "write hello to a.txt")
    write = ToolCall.objects.get(message__conversation=conversation, name="write_file")
    assert (write.status, write.is_gated) == ("succeeded", False)


def test_a_tool_that_always_asks_stays_asking_whatever_is_approved(alice, agent):
    conversation = start(alice, agent, "allow delete_file from now on")
    approval = only_pending(conversation)
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "No change: delete_file always asks a person" in page  # the preview says so before anyone decides

    approval_services.decide(approval.pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash=approval.shown_hash)

    assert "No change: delete_file always asks" in ToolCall.objects.get(pk=approval.tool_call_id).result
    assert "delete_file" in Agent.objects.get(pk=agent.pk).require_approval
