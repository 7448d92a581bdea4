"""Rules from the card, in Chromium against the real stack (daphne, a Celery worker, Redis, the
scripted model): "Always…" allow and deny, the rejection contract's collapsed line, and a trust
suggestion accepted. The same through the JSON API as a program would use it."""
import time

import pytest
from playwright.sync_api import Page, expect

from approvals.models import Approval, Rule
from chat.models import Agent, Conversation
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    browser,
    button,
    card,
    decide,
    last_reply,
    new_page,
    open_conversation,
    page,
    say,
    start,
    status_bar,
    wait_for_pending,
    wait_for_status,
)
from tests.e2e.rules.conftest import opened

pytestmark = pytest.mark.e2e


def send(page: Page, text: str) -> None:
    page.get_by_label("Message", exact=True).fill(text)
    button(page, "Send").click()


def test_always_allow_in_this_conversation_from_the_card_then_the_same_kind_of_call_runs_with_no_card(page, alice, agent, api_for):
    conversation_id = opened(page, api_for(alice), alice, "write one to notes/a.txt")
    first = card(page, "write_file", "notes/a.txt")
    first.get_by_text("More ways to decide calls like this…").click()
    expect(first.get_by_label("path")).to_have_value("notes/*")  # prefilled from the call, editable
    first.get_by_label("in this conversation").check()
    button(first, "Approve and always allow").click()
    expect(first).to_have_attribute("data-status", "succeeded")
    rule = Rule.objects.get()
    assert (rule.effect, rule.scope, str(rule.conversation_id), rule.arguments) == ("allow", "conversation", conversation_id, {"path": "notes/*"})

    send(page, "write two to notes/b.txt")
    second = card(page, "write_file", "notes/b.txt")
    expect(second).to_have_attribute("data-status", "succeeded")
    expect(second).to_contain_text(f"Allowed by rule #{rule.pk}: always allow write_file path notes/* in this conversation")
    expect(second.get_by_role("button", name="Approve", exact=True)).to_have_count(0)  # no card waited
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    automatic = Approval.objects.get(tool_call__arguments__path="notes/b.txt")
    assert (automatic.decided_via, automatic.decided_by, automatic.rule_id) == ("rule", None, rule.pk)

    send(page, "write three to c.txt")  # outside the rule's conditions: asked as usual
    expect(card(page, "write_file", "c.txt")).to_have_attribute("data-status", "pending_approval")


def test_always_deny_with_this_agent_from_the_card_rejects_the_next_such_call_at_once(page, alice, agent, api_for):
    api = api_for(alice)
    opened(page, api, alice, "delete a.txt")
    first = card(page, "delete_file", "a.txt")
    first.get_by_text("More ways to decide calls like this…").click()
    first.get_by_label("path").fill("")  # any path
    first.get_by_label("with this agent (my conversations)").check()
    first.get_by_label("Note (optional)").fill("never delete")
    button(first, "Reject and always deny").click()
    expect(first).to_have_attribute("data-status", "rejected")
    rule = Rule.objects.get()
    assert (rule.effect, rule.scope, rule.arguments, rule.note) == ("deny", "agent_user", {}, "never delete")

    other = start(api, "delete b.txt")  # another conversation with the same agent
    wait_for_status(other, Conversation.Status.IDLE)
    open_conversation(page, other)
    denied = card(page, "delete_file", "b.txt")
    expect(denied).to_have_attribute("data-status", "rejected")
    expect(denied).to_contain_text(f"Denied by rule #{rule.pk}: never delete")
    expect(last_reply(page)).to_have_text(f"I did not delete b.txt (Denied by rule #{rule.pk}: never delete).")


def test_a_call_just_rejected_is_not_asked_again_and_shows_as_a_collapsed_line(page, alice, agent, api_for):
    opened(page, api_for(alice), alice, "delete a.txt")
    first = card(page, "delete_file", "a.txt")
    button(first, "Reject").click()
    first.get_by_label("Reason for rejecting (optional)").fill("I still need it")
    button(first, "Confirm reject").click()
    expect(first).to_have_attribute("data-status", "rejected")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")

    send(page, "delete a.txt")
    repeat = page.locator("article.tool-card-repeat")
    expect(repeat).to_have_count(1)
    expect(repeat.locator("details.repeat > summary")).to_contain_text("asked again and rejected at once: already rejected by alice (“I still need it”)")
    expect(repeat.locator("pre.arguments")).to_be_hidden()  # collapsed: a line, not a card
    expect(repeat.get_by_role("button")).to_have_count(0)
    expect(last_reply(page)).to_contain_text("I did not delete a.txt (Already rejected by alice at ")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    again = Approval.objects.order_by("pk").last()
    assert (again.status, again.decided_via, again.rejection_reason) == ("rejected", "repeat", "I still need it")


def test_a_trust_suggestion_is_offered_after_alike_approvals_and_accepting_it_makes_the_rule(page, alice, agent, api_for):
    Agent.objects.filter(pk=agent.pk).update(trust_after=2)
    api = api_for(alice)
    for name in ("a", "b"):
        conversation_id = start(api, f"write hi to notes/{name}.txt")
        [approval] = wait_for_pending(conversation_id, 1)
        decide(api, approval)
        wait_for_status(conversation_id, Conversation.Status.IDLE)
    opened(page, api, alice, "write hi to notes/c.txt")
    third = card(page, "write_file", "notes/c.txt")
    suggestion = third.locator(".trust-suggestion")
    expect(suggestion).to_contain_text("You have approved 2 alike write_file calls (path notes/*) with this agent")
    assert not Rule.objects.exists()  # offered, never made on its own
    button(suggestion, "Approve and always allow these").click()
    expect(third).to_have_attribute("data-status", "succeeded")
    rule = Rule.objects.get()
    assert (rule.effect, rule.scope, rule.agent_id, rule.arguments) == ("allow", "agent_user", agent.pk, {"path": "notes/*"})

    fourth = start(api, "write hi to notes/d.txt")
    wait_for_status(fourth, Conversation.Status.IDLE)
    assert Approval.objects.get(conversation_id=fourth).rule_id == rule.pk


def test_rules_and_the_rejection_contract_through_the_api(e2e, alice, agent, api_for):
    api = api_for(alice)
    assert api.post("rules", {"effect": "allow", "tool": "*", "scope": "global"}).status_code == 403
    made = api.post("rules", {"effect": "allow", "tool": "write_file", "arguments": {"path": "out/*"}, "scope": "agent_user", "agent": "demo"})
    assert made.status_code == 201 and made.json()["uses"] == 0
    ran = start(api, "write hi to out/a.txt")
    wait_for_status(ran, Conversation.Status.IDLE)
    [item] = api.get("approvals", status="approved").json()["items"]
    assert (item["decided_via"], item["decided_by"], item["rule_id"]) == ("rule", None, made.json()["id"])
    assert api.get("rules").json()["items"][0]["uses"] == 1

    asked = start(api, "delete z.txt")
    [approval] = wait_for_pending(asked, 1)
    remembered = api.post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "no", "remember": {"scope": "conversation"}})
    assert remembered.status_code == 200
    wait_for_status(asked, Conversation.Status.IDLE)
    deny = Rule.objects.get(effect="deny")
    assert (deny.tool, deny.arguments, str(deny.conversation_id)) == ("delete_file", {"path": "z.txt"}, asked)
    assert api.http.delete(f"rules/{deny.pk}").status_code == 204

    say(api, asked, "delete z.txt")  # no rule now, but rejected a moment ago: the rejection contract
    wait_for_status(asked, Conversation.Status.IDLE)
    repeat = api.get("approvals", status="rejected").json()["items"][-1]
    assert (repeat["status"], repeat["decided_via"], repeat["decided_by"], repeat["rejection_reason"]) == ("rejected", "repeat", None, "no")


def test_a_catastrophic_regex_rule_delays_no_one(e2e, alice, bob, agent, api_for):
    """Issue 22: with Python's re, `(a+)+b` on 40 characters of aaaa…c held the worker, inside the
    turn's write transaction, for hours; everyone else's writes waited on it."""
    mine, theirs = api_for(alice), api_for(bob)
    made = mine.post("rules", {"effect": "allow", "tool": "write_file", "arguments": {"content": {"regex": "(a+)+b"}},
                               "scope": "agent_user", "agent": "demo"})
    assert made.status_code == 201, made.text
    slow = start(mine, f"write {'a' * 39}c to x.txt")
    took = []
    for n in range(3):
        started = time.monotonic()
        start(theirs, f"what is {n} + 1")
        took.append(time.monotonic() - started)
    wait_for_pending(slow, 1)  # the rule does not match: the call waits for a human
    assert max(took) < 1, took
    assert Rule.objects.get().uses == 0
