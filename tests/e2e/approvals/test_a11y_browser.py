"""Accessibility in Chromium, against the real stack: axe-core (vendored, injected by the test, never
served by a page) finds no serious or critical violation on the chat, the dashboard, history, rules
and the Telegram page, at 1280 and 390 px; a card pushed to the page is announced in one short
sentence; after a decision the focus moves on to the next pending card (never to the body); "Approve
all" comes after the cards it approves; and the rules page says what a change did."""
import pytest
from playwright.sync_api import Page, expect

from approvals.policy import rulemaking
from approvals.models import Approval, Rule
from chat.models import Conversation
from tests.e2e.browser import (  # noqa: F401  (browser and new_page are fixtures)
    browser,
    button,
    card,
    decide,
    log_in,
    new_page,
    open_conversation,
    say,
    start,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e

AXE = "/static/vendor/axe-core-4.14.1.min.js"  # loaded by URL: the pages' CSP allows no inline script
WIDTHS = (1280, 390)
SERIOUS = ("serious", "critical")


def axe_violations(page: Page) -> list[dict]:
    """The serious and critical violations axe-core finds on the page as it is now."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(url=AXE)
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [violation for violation in results["violations"] if violation["impact"] in SERIOUS]


def described(violations: list[dict]) -> str:
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']}")
        for node in violation["nodes"][:5]:
            lines.append(f"    {node['target']}: {node['failureSummary']}".replace("\n", " "))
    return "\n".join(lines)


def assert_accessible(page: Page, what: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        violations = axe_violations(page)
        assert not violations, f"{what} at {width} px:\n{described(violations)}"


def logged_in(new_page, user) -> Page:
    page = new_page(width=1280, height=900)
    log_in(page, user)
    return page


# --- axe-core on every page a person decides on ------------------------------------------------


def test_the_chat_with_pending_decided_and_question_cards_has_no_serious_violations(new_page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "write hello to a.txt")
    [write] = wait_for_pending(conversation_id, 1)
    decide(api, write)
    wait_for_status(conversation_id, Conversation.Status.IDLE)
    say(api, conversation_id, "delete a.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    asking = start(api, "ask me to choose between tea, coffee and water")
    wait_for_pending(asking, 1)

    page = logged_in(new_page, alice)
    open_conversation(page, conversation_id)
    expect(page.locator('.tool-card[data-status="pending_approval"]')).to_have_count(2)
    assert_accessible(page, "the chat with two pending cards and a decided one")
    open_conversation(page, asking)
    expect(page.locator('.tool-card[data-status="pending_approval"]')).to_have_count(1)
    assert_accessible(page, "the chat with a question")


def test_the_dashboard_and_history_have_no_serious_violations(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    decided = start(api, "write hello to c.txt")
    [write] = wait_for_pending(decided, 1)
    decide(api_for(bob), write, "reject", "not today")

    page = logged_in(new_page, bob)
    page.goto("/approvals/")
    expect(page.locator("#dashboard-rows [data-line]").first).to_be_visible()  # the two deletes: one group
    assert_accessible(page, "the dashboard with rows")
    page.goto("/approvals/history/")
    expect(page.locator("table.history tbody tr")).not_to_have_count(0)
    assert_accessible(page, "history with rows")


def test_the_rules_telegram_list_and_login_pages_have_no_serious_violations(new_page, alice, agent):
    rulemaking.create(
        alice, effect="allow", tool="write_file", arguments={"path": "notes/*"}, scope=Rule.Scope.AGENT_USER,
        agent=agent.slug, note="notes are mine",
    )
    page = logged_in(new_page, alice)
    page.goto("/rules/")
    expect(page.locator("tr.rule")).to_have_count(1)
    assert_accessible(page, "rules with a rule")
    button(page.locator("tr.rule"), "Disable").click()
    expect(page.locator("#rules-status")).not_to_be_empty()
    assert_accessible(page, "rules with a disabled rule and a status line")
    page.goto("/telegram/")
    assert_accessible(page, "the Telegram page")
    page.goto("/")
    assert_accessible(page, "the conversation list")
    page.goto("/no-such-page/")
    assert_accessible(page, "the page for a wrong address")

    logged_out = new_page(width=1280, height=900)
    logged_out.goto("/accounts/login/")
    assert_accessible(logged_out, "the login page")


# --- Announcements, focus and order ------------------------------------------------------------


def announced(page: Page):
    return page.locator("#announcer")


def focused(page: Page) -> str:
    return page.evaluate("document.activeElement === document.body ? 'body' : document.activeElement.id || document.activeElement.textContent.trim()")


def test_a_pushed_card_is_announced_in_one_short_sentence_and_a_decision_made_elsewhere_too(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "what is 2 + 2")
    wait_for_status(conversation_id, Conversation.Status.IDLE)
    page = logged_in(new_page, alice)
    open_conversation(page, conversation_id)
    expect(announced(page)).to_have_text("")

    say(api, conversation_id, "write hello to notes.txt")
    [write] = wait_for_pending(conversation_id, 1)
    expect(announced(page)).to_have_text(f"write_file needs approval: notes.txt, {write.risk} risk.")

    decide(api_for(bob), write)
    expect(announced(page)).to_have_text("write_file approved by bob.")
    wait_for_status(conversation_id, Conversation.Status.IDLE)

    say(api, conversation_id, "delete a.txt and b.txt")
    first, second = wait_for_pending(conversation_id, 2)
    expect(announced(page)).to_have_text(
        f"2 calls need approval: delete_file a.txt, {first.risk} risk; delete_file b.txt, {second.risk} risk."
    )


def test_after_a_decision_the_focus_moves_to_the_next_pending_card_then_to_the_message_box(new_page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt and b.txt")
    first, second = wait_for_pending(conversation_id, 2)
    page = logged_in(new_page, alice)
    open_conversation(page, conversation_id)
    # The re-read that the socket's open triggers has settled: htmx has wired its forms (before, a
    # quick Enter submits the plain form and reloads the page).
    expect(page.locator("html")).to_have_attribute("data-live-refreshes", "1")

    button(page.locator(f"#tool-call-{first.tool_call_id}"), "Approve").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"#tool-call-{first.tool_call_id}")).not_to_have_attribute("data-status", "pending_approval")
    expect(page.locator(f"#tool-call-{second.tool_call_id}")).to_be_focused()
    assert not Approval.objects.get(pk=second.pk).decided_at  # the focus decides nothing

    # From the focused card, Tab reaches its controls; its Approve moves the focus on again.
    button(page.locator(f"#tool-call-{second.tool_call_id}"), "Approve").click()
    expect(page.get_by_label("Message", exact=True)).to_be_focused()


def test_approve_all_is_not_the_first_control_after_the_nav(new_page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt and b.txt")
    first, second = wait_for_pending(conversation_id, 2)
    page = logged_in(new_page, alice)
    open_conversation(page, conversation_id)
    expect(button(page, "Approve all (2)")).to_be_visible()

    # The newest pending card took the focus when the page opened; a keyboard user starts from the top.
    page.locator("header a, header button").first.focus()
    order = [page.evaluate("document.activeElement.textContent.trim()")]
    for _ in range(60):
        page.keyboard.press("Tab")
        order.append(page.evaluate(
            "(() => { const e = document.activeElement; const card = e.closest('.tool-card');"
            " return (card ? card.id + ' ' : '') + (e.textContent || e.getAttribute('aria-label') || e.id).trim(); })()"
        ))
        if order[-1] == "Approve all (2)":
            break
    assert "Log out" in order, order
    after_nav = order[order.index("Log out") + 1]
    assert not after_nav.startswith("Approve all"), order
    approve_all = order.index("Approve all (2)")
    for approval in (first, second):
        assert any(step.startswith(f"tool-call-{approval.tool_call_id} ") for step in order[:approve_all]), order


def test_changing_a_rule_says_what_it_did_and_keeps_the_focus(new_page, alice, agent):
    rule = rulemaking.create(
        alice, effect="allow", tool="write_file", arguments={"path": "notes/*"}, scope=Rule.Scope.AGENT_USER,
        agent=agent.slug, note="notes are mine",
    )
    page = logged_in(new_page, alice)
    page.goto("/rules/")
    status = page.get_by_role("status").filter(has_text="Rule #")
    row = page.locator(f"#rule-{rule.pk}")

    button(row, "Disable").focus()
    page.keyboard.press("Enter")
    expect(status).to_have_text(f"Rule #{rule.pk} disabled: it decides nothing until it is enabled again.")
    expect(button(row, "Enable")).to_be_focused()

    row.get_by_text("Delete…").click()
    button(row, f"Delete rule #{rule.pk}").click()
    expect(row).to_have_count(0)
    expect(status).to_contain_text(f"Rule #{rule.pk} deleted")
    expect(page.locator("#rules-status")).to_be_focused()


def test_a_card_is_decided_with_the_keyboard_alone_reject_with_a_reason_and_always(new_page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt and b.txt")
    first, second = wait_for_pending(conversation_id, 2)
    page = logged_in(new_page, alice)
    open_conversation(page, conversation_id)
    expect(page.locator("html")).to_have_attribute("data-live-refreshes", "1")
    first_card = page.locator(f"#tool-call-{first.tool_call_id}")

    # "More ways…" opens the menu of rules from the keyboard, and the toggle again closes it.
    always = button(first_card, "More ways to decide calls like this…")
    always.focus()
    page.keyboard.press("Enter")
    expect(always).to_have_attribute("aria-expanded", "true")
    expect(first_card.locator(".remember-form")).to_be_visible()
    always.focus()
    page.keyboard.press("Enter")
    expect(first_card.locator(".remember-form")).to_be_hidden()

    # Reject opens the reason, the focus in it; Tab reaches Confirm reject; Enter decides.
    reject = button(first_card, "Reject")
    reject.focus()
    page.keyboard.press("Enter")
    expect(first_card.get_by_label("Reason for rejecting (optional)")).to_be_focused()
    page.keyboard.type("not now")
    page.keyboard.press("Tab")
    expect(button(first_card, "Confirm reject")).to_be_focused()
    page.keyboard.press("Enter")
    expect(first_card.locator(".decided, .outcome").first).to_contain_text("Rejected")
    expect(page.locator(f"#tool-call-{second.tool_call_id}")).to_be_focused()
    stored = Approval.objects.get(pk=first.pk)
    assert (stored.status, stored.rejection_reason) == ("rejected", "not now")

    # From the focused card, Tab goes to its first control.
    page.keyboard.press("Tab")
    assert page.evaluate(f"document.getElementById('tool-call-{second.tool_call_id}').contains(document.activeElement)")


def test_the_dashboard_says_when_a_new_call_needs_approval(new_page, alice, bob, agent, api_for):
    page = logged_in(new_page, bob)
    page.goto("/approvals/")
    expect(page.locator("html")).to_have_attribute("data-ws-opens", "1")
    expect(page.locator("#dashboard-count")).to_have_attribute("data-count", "0")

    conversation_id = start(api_for(alice), "delete a.txt")
    wait_for_pending(conversation_id, 1)
    expect(announced(page)).to_have_text("1 new call needs approval; 1 pending.")
