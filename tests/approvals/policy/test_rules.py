"""Allow and deny rules (issue 14, the engine): what they never approve, that deny wins, scopes,
uses and expiry, and the whole way through the loop with the scripted model (eager Celery)."""
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given, settings as hypothesis_settings, strategies as st

from approvals import audit
from approvals.policy import rulemaking, rules
from approvals.models import Approval, Rule
from chat import services
from chat.models import Conversation, ToolCall
from tests.conftest import last_reply, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


class R:
    """A rule as the matcher reads it, without the database."""

    def __init__(self, effect, tool, arguments):
        self.effect, self.tool, self.arguments = effect, tool, arguments


TOOLS = st.sampled_from(["write_file", "delete_file", "send_email", "notes__add", "notes__drop"])
PATTERNS = st.sampled_from(["write_file", "delete_*", "notes__*", "*", "send_email", "?rite_file"])
RISK_ORDER = ["low", "medium", "high", "critical"]
INVISIBLE = ("\u202e", "\u200b")  # right-to-left override, zero-width space
VALUES = st.sampled_from(["notes/a.txt", "a.txt", "notes/\u202etxt.exe", "bob@example.com", "x\u200by"])
CONDITIONS = st.one_of(
    st.sampled_from(["notes/*", "*", "*.txt", "bob@*"]), st.builds(lambda r: {"regex": r}, st.sampled_from(["notes/.*", ".*", "[", "a\\.txt"]))
)
RULES = st.lists(
    st.builds(R, st.sampled_from(["allow", "deny"]), PATTERNS, st.dictionaries(st.sampled_from(["path", "to"]), CONDITIONS, max_size=2)),
    max_size=6,
)
CALLS = st.builds(
    rules.Call,
    tool=TOOLS,
    arguments=st.dictionaries(st.sampled_from(["path", "to", "content"]), VALUES, max_size=3),
    risk=st.sampled_from(["low", "medium", "high", "critical"]),
    approver_required=st.booleans(),
    max_auto_approve_risk=st.sampled_from(["low", "medium", "high", "critical"]),  # "critical": a misconfigured agent
)


@hypothesis_settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(RULES, CALLS)
def test_no_rule_ever_approves_what_must_be_asked_and_deny_always_wins(candidates, call):
    chosen = rules.choose(candidates, call)
    if any(rule.effect == "deny" and rules.matches(rule, call) for rule in candidates):
        assert chosen and chosen[0].effect == "deny"
    if any(rule.effect == "allow" for rule in chosen):
        assert call.risk != "critical"
        assert not call.approver_required
        assert RISK_ORDER.index(call.risk) <= RISK_ORDER.index(call.max_auto_approve_risk)
        assert not any(hidden in value for value in call.arguments.values() for hidden in INVISIBLE)
    # Every rule tried matches the call.
    assert all(rules.matches(rule, call) for rule in chosen)


def test_conditions_match_whole_arguments_by_glob_or_regex():
    call = rules.Call("write_file", {"path": "notes/a.txt", "content": "hi"}, "medium", False)
    assert rules.matches(R("allow", "write_*", {"path": "notes/*"}), call)
    assert rules.matches(R("allow", "write_file", {"path": {"regex": r"notes/\w+\.txt"}}), call)
    assert not rules.matches(R("allow", "write_file", {"path": {"regex": "notes"}}), call)  # whole, not a search
    assert not rules.matches(R("allow", "write_file", {"path": "a.txt"}), call)
    assert not rules.matches(R("allow", "write_file", {"missing": "*"}), call)
    assert not rules.matches(R("allow", "write_file", {"path": {"regex": "["}}), call)  # broken: matches nothing
    assert not rules.matches(R("allow", "delete_file", {}), call)


def rule(user, **fields) -> Rule:
    defaults = {"effect": "allow", "tool": "write_file", "scope": Rule.Scope.GLOBAL, "created_by": user}
    return Rule.objects.create(**(defaults | fields))


def test_a_rules_decision_reads_as_such_in_the_api(alice, agent, api_as):
    allow = rule(alice)
    conversation = start_conversation(alice, agent, "write hi to a.txt")
    [item] = api_as(alice).get("approvals").json()["items"]
    assert (item["status"], item["decided_via"], item["decided_by"], item["rule_id"]) == ("approved", "rule", None, allow.pk)
    assert item["conversation_id"] == str(conversation.pk)


def test_an_allow_rule_runs_a_matching_call_with_no_one_asked(alice, agent, settings):
    allow = rule(alice, scope=Rule.Scope.AGENT_USER, agent=agent, arguments={"path": "notes/*"}, note="notes are mine")
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    assert conversation.status == Conversation.Status.IDLE
    approval = Approval.objects.get(conversation=conversation)
    assert (approval.status, approval.decided_via, approval.decided_by, approval.rule) == ("approved", "rule", None, allow)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED
    assert (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "notes" / "a.txt").read_text() == "hi"
    allow.refresh_from_db()
    assert allow.uses == 1 and allow.last_used_at is not None
    assert audit.verify().is_intact

    elsewhere = start_conversation(alice, agent, "write hi to a.txt")  # the condition does not match
    assert elsewhere.status == Conversation.Status.WAITING_FOR_APPROVAL


def test_a_deny_rule_rejects_at_once_and_wins_over_an_allow_rule(alice, agent):
    rule(alice, effect="allow")
    conversation = start_conversation(alice, agent, "read x.txt")  # a conversation to scope the deny to
    deny = rule(alice, effect="deny", scope=Rule.Scope.CONVERSATION, conversation=conversation, tool="write_*", note="no writes today")
    services.post_message(conversation=conversation, user=alice, content="write hi to a.txt")
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    approval = Approval.objects.get(conversation=conversation)
    assert (approval.status, approval.decided_via, approval.rule, approval.rejection_reason) == (
        "rejected", "rule", deny, f"Denied by rule #{deny.pk}: no writes today",
    )
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert (call.status, call.result) == ("rejected", f"Denied by rule #{deny.pk}: no writes today")
    assert last_reply(conversation) == f"I did not write a.txt (Denied by rule #{deny.pk}: no writes today)."


@pytest.mark.parametrize(
    ("text", "agent_fixture", "why"),
    [
        ("delete all files", "agent", "critical"),
        ("delete a.txt", "ops_agent", "four eyes"),
    ],
)
def test_critical_and_four_eyes_calls_are_never_approved_by_a_rule(alice, request, text, agent_fixture, why):
    agent = request.getfixturevalue(agent_fixture)
    rule(alice, tool="*")
    conversation = start_conversation(alice, agent, text)
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL, why
    assert all(a.status == "pending" for a in Approval.objects.filter(conversation=conversation))
    assert Rule.objects.get().uses == 0


def test_a_call_riskier_than_the_agents_limit_or_with_invisible_characters_still_asks(alice, agent):
    rule(alice, tool="*")
    agent.max_auto_approve_risk = "low"  # write_file is medium
    agent.save()
    assert start_conversation(alice, agent, "write hi to a.txt").status == Conversation.Status.WAITING_FOR_APPROVAL
    agent.max_auto_approve_risk = "medium"
    agent.save()
    hidden = start_conversation(alice, agent, "write hi to a\u200b.txt")
    assert hidden.status == Conversation.Status.WAITING_FOR_APPROVAL


def test_scopes_uses_expiry_and_disabling(alice, bob, agent):
    mine = rule(alice, scope=Rule.Scope.AGENT_USER, agent=agent, max_uses=1)
    assert start_conversation(bob, agent, "write hi to a.txt").status == Conversation.Status.WAITING_FOR_APPROVAL  # alice's rule
    assert start_conversation(alice, agent, "write hi to a.txt").status == Conversation.Status.IDLE
    assert start_conversation(alice, agent, "write hi to b.txt").status == Conversation.Status.WAITING_FOR_APPROVAL  # used up
    mine.refresh_from_db()
    assert mine.uses == 1

    expired = rule(alice, expires_at=timezone.now() - timedelta(seconds=1))
    disabled = rule(alice, enabled=False)
    assert start_conversation(alice, agent, "write hi to c.txt").status == Conversation.Status.WAITING_FOR_APPROVAL
    assert (Rule.objects.get(pk=expired.pk).uses, Rule.objects.get(pk=disabled.pk).uses) == (0, 0)


def test_concurrent_workers_cannot_both_take_a_rules_last_use(alice):
    last = rule(alice, max_uses=1)
    results, barrier = [], threading.Barrier(4)

    def take():
        barrier.wait()
        try:
            results.append(rules.take_use(last))
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False, False, False, True]
    last.refresh_from_db()
    assert last.uses == 1


# --- Conditions that mean what they say (issue 22) ----------------------------------------------------


def test_a_catastrophic_regex_matches_in_linear_time():
    catastrophic = R("allow", "write_file", {"content": {"regex": "(a+)+b"}})
    started = time.monotonic()
    for text in ("a" * 40 + "c", "a" * 100_000 + "c"):  # Python's re takes ~2**n steps on the first
        assert not rules.matches(catastrophic, rules.Call("write_file", {"path": "x.txt", "content": text}, "medium", False))
    assert rules.matches(catastrophic, rules.Call("write_file", {"path": "x.txt", "content": "aaab"}, "medium", False))
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("path", ["notes/../x.txt", "notes/../../x.txt", "notes/sub/../../x.txt", "notes/a/b.txt", "../notes/a.txt"])
def test_an_allowed_folder_never_lets_a_path_climb_out_or_into_subfolders(path):
    allow = R("allow", "write_file", {"path": "notes/*"})
    assert not rules.matches(allow, rules.Call("write_file", {"path": path}, "medium", False))


@pytest.mark.parametrize("path", ["notes/a.txt", "notes//a.txt", "./notes/a.txt"])
def test_an_allowed_folder_matches_its_files_however_spelled(path):
    assert rules.matches(R("allow", "write_file", {"path": "notes/*"}), rules.Call("write_file", {"path": path}, "medium", False))
    assert rules.matches(R("allow", "write_file", {"path": "notes/**"}), rules.Call("write_file", {"path": "notes/a/b/c.txt"}, "medium", False))


@pytest.mark.parametrize("path", ["secrets/key", "secrets/../secrets/key", "/secrets/key", "secrets/sub/key", "../outside", "secrets/.env"])
def test_a_denied_folder_denies_every_spelling_of_its_paths(path):
    deny = R("deny", "write_file", {"path": "secrets/*"})
    assert rules.matches(deny, rules.Call("write_file", {"path": path}, "medium", False))


@pytest.mark.parametrize(
    "url",
    [
        "https://exfil.attacker.test/?secret=s3cr3t",
        "https://docs.vendor.test.attacker.test/",
        "https://docs.vendor.test@attacker.test/",
        "https://docs.vendor.test:8443/",
        "http://docs.vendor.test/",
        "https://docs.vendor.test\\@attacker.test/",
        "https://docs.vendor.test/a/../../admin",
        "https:/docs.vendor.test/",
    ],
)
def test_a_url_rule_allows_its_own_host_only(url):
    allow = R("allow", "web_fetch", {"url": "https://docs.vendor.test/*"})
    assert not rules.matches(allow, rules.Call("web_fetch", {"url": url}, "medium", False))


@pytest.mark.parametrize("url", ["https://docs.vendor.test", "https://docs.vendor.test/guide/a?x=1", "HTTPS://Docs.Vendor.Test:443/b"])
def test_a_url_rule_allows_every_page_under_its_prefix(url):
    allow = R("allow", "web_fetch", {"url": "https://docs.vendor.test/*"})
    assert rules.matches(allow, rules.Call("web_fetch", {"url": url}, "medium", False))


def test_a_url_deny_holds_whatever_the_spelling_of_its_host():
    deny = R("deny", "web_fetch", {"url": "https://evil.test/*"})
    for url in ("https://EVIL.test./x", "https://me@evil.test/", "https://evil.test:443/a/../b"):
        assert rules.matches(deny, rules.Call("web_fetch", {"url": url}, "medium", False)), url


@pytest.mark.parametrize(
    ("arguments", "prefilled"),
    [
        ({"url": "https://docs.vendor.test"}, {"url": "https://docs.vendor.test/*"}),
        ({"url": "https://me:pw@Docs.Vendor.Test/guide/intro.html?q=1"}, {"url": "https://docs.vendor.test/guide/*"}),
        ({"path": "notes/a.txt", "content": "hi"}, {"path": "notes/*"}),
        ({"path": "notes/../x.txt"}, {"path": "notes/../x.txt"}),  # never a folder it climbs out of
        ({"to": "a/b@example.com"}, {"to": "a/b@example.com"}),  # not a path: exactly
    ],
)
def test_the_prefilled_conditions_cover_the_call_and_no_more(arguments, prefilled):
    assert rulemaking.conditions_for(arguments) == prefilled


@pytest.mark.parametrize(
    "url",
    [
        "https://exfil.attacker.test/x", "https://EXFIL.attacker.test/x", "https://exfil\uff0eattacker\uff0etest/?s=1",
        "http://exfil.attacker.test/x", "https://exfil.attacker.test:8443/x", "https://exfil.attacker.test./x",
    ],
)
def test_a_url_deny_rule_meets_every_spelling_a_client_sends_to_that_host(url):
    deny = R("deny", "web_fetch", {"url": "https://exfil.attacker.test/*"})
    allow = R("allow", "web_fetch", {"url": "https://exfil.attacker.test/*"})
    call = rules.Call("web_fetch", {"url": url}, "medium", False)

    assert rules.matches(deny, call)
    # An allow holds only for its scheme, host and port, spelled plainly.
    assert rules.matches(allow, call) == (url in ("https://exfil.attacker.test/x", "https://EXFIL.attacker.test/x", "https://exfil.attacker.test./x"))


def test_a_glob_deny_rule_meets_the_value_in_any_case():
    call = rules.Call("send_email", {"to": "ceo@Competitor.TEST"}, "high", False)
    assert rules.matches(R("deny", "send_email", {"to": "*@competitor.test"}), call)
    assert not rules.matches(R("allow", "send_email", {"to": "*@competitor.test"}), call)
