"""Rules with memory (issue 40, item 3): `after` (only once an earlier call of the conversation
succeeded, with the same arguments, within a window) and `at_most` (at most n calls decided in any
window; the rest asked as if the rule were not there), through the API, in the per-call "why",
simulated and shadowed alike, and refused clearly when they say nothing valid."""
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from approvals.models import Approval, Rule, ShadowVerdict
from approvals.policy import memory, simulate
from chat.models import ToolCall
from tests.conftest import ApiClient, say, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def approver(bob):
    from approvals.permissions import approvers_group

    bob.groups.add(approvers_group())
    return bob


def made(user, **fields) -> dict:
    body = {"effect": "allow", "tool": "write_file", "scope": "global"} | fields
    response = ApiClient(user).post("rules", body)
    assert response.status_code == 201, response.content
    return response.json()


def calls(conversation) -> list[ToolCall]:
    return list(ToolCall.objects.filter(message__conversation=conversation).select_related("approval").order_by("pk"))


def why(call: ToolCall, rule_id: int) -> str:
    (found,) = [s["detail"] for s in call.approval.explanation if s["step"].startswith(f"rule #{rule_id} ")]
    return found


def test_after_applies_only_once_the_earlier_call_succeeded_with_the_same_argument(alice, approver, agent):
    rule = made(approver, after={"tool": "read_file", "status": "succeeded", "same": ["path"], "within_seconds": 3600})
    assert rule["after"] == {"tool": "read_file", "status": "succeeded", "same": ["path"], "within_seconds": 3600}
    conversation = start_conversation(alice, agent, "write first to notes.txt")
    first = calls(conversation)[-1]
    assert first.approval.status == "pending"  # nothing read yet
    assert why(first, rule["id"]) == (
        "conditions not met: no earlier `read_file` call succeeded with the same path in this conversation in the last hour."
    )
    ApiClient(alice).post(f"approvals/{first.approval.pk}/decision", {"decision": "approve", "shown_hash": first.approval.shown_hash})

    say(conversation, alice, "read notes.txt")
    say(conversation, alice, "write second to notes.txt")
    say(conversation, alice, "write third to other.txt")

    *_, read, second, other = calls(conversation)
    assert read.status == "succeeded" and read.name == "read_file"
    assert (second.approval.decided_via, second.approval.rule_id) == ("rule", rule["id"])
    assert other.approval.status == "pending"  # another path: no earlier read of it
    elsewhere = start_conversation(alice, agent, "write fourth to notes.txt")  # another conversation read nothing
    assert calls(elsewhere)[-1].approval.status == "pending"


def test_at_most_decides_n_in_the_window_and_asks_the_rest_saying_why(alice, approver, agent):
    rule = made(approver, at_most={"count": 2, "within_seconds": 60})
    conversation = start_conversation(alice, agent, "write 1 to a.txt")
    say(conversation, alice, "write 2 to b.txt")
    say(conversation, alice, "write 3 to c.txt")

    first, second, third = calls(conversation)
    assert [c.approval.decided_via for c in (first, second)] == ["rule", "rule"]
    assert third.approval.status == "pending" and third.approval.rule_id is None
    assert why(third, rule["id"]) == "Matched, but it already decided its 2 calls in the last minute."

    saved = Rule.objects.get(pk=rule["id"])
    with transaction.atomic():  # as the gate counts: in its transaction, under the rule's lock
        assert not memory.under_limit(saved)
        assert memory.under_limit(saved, now=timezone.now() + timedelta(seconds=61))  # the window moved on: it decides again


def test_memory_is_simulated_and_shadowed_with_the_same_counts(alice, approver, agent):
    shapes = [
        {"after": {"tool": "read_file", "same": ["path"], "within_seconds": 3600}},
        {"at_most": {"count": 1, "within_seconds": 3600}},
    ]
    shadows = [made(approver, mode="shadow", **shape) for shape in shapes]
    conversation = start_conversation(alice, agent, "write a to notes.txt")
    ApiClient(alice).post(f"approvals/{calls(conversation)[0].approval.pk}/decision",
                          {"decision": "approve", "shown_hash": calls(conversation)[0].approval.shown_hash})
    for text in ("read notes.txt", "write b to notes.txt", "write c to other.txt"):
        say(conversation, alice, text)

    for shape, rule in zip(shapes, shadows):
        counted = ApiClient(approver).get(f"rules/{rule['id']}").json()["would_have"]
        replayed = simulate.simulate_for(approver, effect="allow", tool="write_file", arguments={}, scope="global", days=1, **shape)
        assert (counted["allow"], replayed.would_allow) in ((1, 1),), (shape, counted, replayed)
    assert ShadowVerdict.objects.count() == 2


@pytest.mark.parametrize("fields, error", [
    ({"after": {"tool": "", "within_seconds": 60}}, "`after.tool` is a tool's name or a glob"),
    ({"after": {"tool": "x", "within_seconds": 0}}, "`after.within_seconds` is a whole number of seconds from 1"),
    ({"after": {"tool": "x", "within_seconds": 60, "status": "maybe"}}, "`after.status` is one of succeeded, failed, rejected"),
    ({"after": {"tool": "x", "within_seconds": 60, "same": "path"}}, "`after.same` is a list"),
    ({"after": {"tool": "x", "within_seconds": 60, "when": 1}}, '`after` is {"tool"'),
    ({"at_most": {"count": 0, "within_seconds": 60}}, "`at_most.count` is a whole number from 1"),
    ({"at_most": {"count": True, "within_seconds": 60}}, "`at_most.count` is a whole number from 1"),
    ({"at_most": {"count": 2}}, '`at_most` is {"count": n, "within_seconds": n}'),
])
def test_a_memory_condition_that_says_nothing_valid_is_refused(approver, fields, error):
    response = ApiClient(approver).post("rules", {"effect": "allow", "tool": "write_file", "scope": "global"} | fields)
    assert response.status_code == 400 and error in response.json()["detail"], response.content
    assert not Rule.objects.exists()


def test_memory_is_part_of_the_policy_file(approver):
    from approvals.policy.versions import rule_entry

    rule = Rule.objects.create(effect="allow", tool="x", scope="global", created_by=approver, at_most={"count": 2, "within_seconds": 60})
    assert rule_entry(rule)["at_most"] == {"count": 2, "within_seconds": 60} and "after" not in rule_entry(rule)


def test_the_rules_page_makes_and_shows_a_rule_with_memory(approver):
    from tests.conftest import client_for

    page = client_for(approver)
    response = page.post("/rules/new/", {
        "step": "save", "effect": "allow", "tool": "refund", "scope": "global", "mode": "live",
        "after_tool": "fraud_check", "after_same": "order_id, amount", "after_seconds": "600", "at_most_count": "3", "at_most_seconds": "3600",
    })
    assert response.status_code == 302, response.content
    rule = Rule.objects.get()
    assert rule.after == {"tool": "fraud_check", "status": "succeeded", "same": ["order_id", "amount"], "within_seconds": 600}
    assert rule.at_most == {"count": 3, "within_seconds": 3600}
    html = page.get("/rules/").content.decode()
    assert "only after <code>fraud_check</code> succeeded with the same <code>order_id</code>, <code>amount</code>" in html
    assert "at most 3 calls per 3600 s" in html
    refused = page.post("/rules/new/", {"step": "save", "effect": "allow", "tool": "x", "scope": "global", "at_most_count": "0", "at_most_seconds": "60"})
    assert refused.status_code == 400 and "at_most.count" in refused.content.decode()
