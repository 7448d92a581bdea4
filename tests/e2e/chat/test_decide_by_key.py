"""A chat card decided by one key, never blind (issue 38, items 1 and 2), in Chromium on a real stack.

The contract: a pending card is an element with `data-approval-id` and
`data-status="pending_approval"`; with it (or a control in it) focused, `1` approves it (API status
`approved`, `decided_via` `chat`) and `3` opens and focuses its reject reason. Also: `2` approves
and saves the narrowest rule, undone on the card; `e` edits; nothing approves until the preview was
on screen whole; a decided card is one line and one fold; Respond sends the agent words instead.

Not named *_browser.py: CI runs these on PostgreSQL too (the decisions' race and the rule's save are
the database's part of each key)."""
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

from approvals.models import Approval, Rule
from tests.conftest import wait_until
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    card,
    last_reply,
    log_in,
    new_page,
    open_conversation,
    start,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e


def decided(approval: Approval, status: str) -> Approval:
    return wait_until(
        lambda: Approval.objects.filter(pk=approval.pk, status=status).select_related("decided_by").first(),
        timeout=10, message=f"approval {approval.pk} {status}",
    )


def chat_with_pending(new_page, user, api, text: str, *, width: int = 1280, height: int = 800, count: int = 1):
    conversation_id = start(api, text)
    approvals = wait_for_pending(conversation_id, count)
    page = new_page(width=width, height=height)
    log_in(page, user)
    open_conversation(page, conversation_id)
    return page, approvals


def pending_card(page, approval: Approval):
    found = page.locator(f'[data-approval-id="{approval.pk}"][data-status="pending_approval"]')
    expect(found).to_have_count(1)
    return found


def test_key_1_approves_the_focused_card_through_the_chat(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    found = pending_card(page, approval)
    expect(found.locator("kbd.key")).to_have_text(["1", "2", "3", "e"])  # shown on the card

    found.focus()
    page.keyboard.press("1")

    approval = decided(approval, "approved")
    assert (approval.decided_via, approval.decided_by.get_username()) == ("chat", alice.get_username())
    response = api_for(alice).get(f"approvals/{approval.pk}")
    assert (response.json()["status"], response.json()["decided_via"]) == ("approved", "chat")
    expect(page.locator(f'[data-approval-id="{approval.pk}"]')).to_have_attribute("data-status", "succeeded")


def test_a_waiting_card_takes_the_focus_so_the_key_needs_no_click(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    found = pending_card(page, approval)
    expect(found).to_be_focused()

    page.keyboard.press("1")

    decided(approval, "approved")


def test_a_key_typed_in_the_composer_is_text_not_a_decision(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    box = page.locator("#message-box")
    box.click()
    page.keyboard.type("1 2 3 e")

    expect(box).to_have_value("1 2 3 e")
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_key_3_opens_the_reason_focused_and_enter_sends_the_rejection(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    found = pending_card(page, approval)
    button(found, "Approve").focus()  # the first control in it

    page.keyboard.press("3")
    reason = found.locator(f"#reject-reason-{approval.pk}")
    expect(reason).to_be_focused()
    page.keyboard.type("not today")
    page.keyboard.press("Enter")

    approval = decided(approval, "rejected")
    assert (approval.rejection_reason, approval.decided_via) == ("not today", "chat")
    expect(page.locator(f'[data-approval-id="{approval.pk}"] .decided')).to_contain_text("⊘ Rejected by alice via chat")


def test_key_2_approves_and_saves_the_narrowest_rule_which_the_card_undoes(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    pending_card(page, approval).focus()

    page.keyboard.press("2")

    decided(approval, "approved")
    rule = wait_until(lambda: Rule.objects.filter(made_from=approval).first(), timeout=10, message="the rule")
    assert (rule.effect, rule.scope, str(rule.conversation_id), rule.arguments) == ("allow", "conversation", str(approval.conversation_id), {"path": "notes.txt"})
    shown = page.locator(f"#rule-saved-{rule.pk}")
    expect(shown).to_contain_text(f"Saved as rule #{rule.pk}")
    expect(page.locator(f'[data-approval-id="{approval.pk}"]')).to_have_attribute("data-status", "succeeded")  # after the push too
    # The agent's reply re-renders its message, cards and all, from what is stored: the undo's note
    # is the click's answer, not stored, so the reply must land first or it takes the note away.
    expect(page.locator("#conversation-status")).to_have_attribute("data-status", "idle")
    expect(page.locator(f"#rule-saved-{rule.pk}")).to_contain_text(f"Saved as rule #{rule.pk}")  # re-read from the rule
    button(page.locator(f"#rule-saved-{rule.pk}"), "Undo: remove this rule").click()

    expect(page.locator(".rule-undone")).to_have_text(f"Rule #{rule.pk} removed: calls like this ask again.")
    wait_until(lambda: Rule.objects.filter(pk=rule.pk, deleted_at__isnull=False).exists(), timeout=10, message="the rule removed")


def test_key_e_opens_the_edit_form(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    pending_card(page, approval).focus()

    page.keyboard.press("e")

    expect(page.locator(f'[data-approval-id="{approval.pk}"] form.edit-form')).to_be_visible()
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_nothing_approves_until_the_whole_preview_was_on_screen(new_page, alice, agent, api_for):
    content = "\n".join(f"line {n} of a long note" for n in range(1, 41))
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), f"write {content} to notes.txt", height=420)
    found = pending_card(page, approval)
    preview = found.locator(".preview pre")
    page.evaluate("window.scrollTo(0, 0)")  # the card below the fold, its preview's box never scrolled
    page.evaluate(f"document.getElementById('tool-call-{approval.tool_call_id}').focus({{preventScroll: true}})")

    page.keyboard.press("1")
    note = found.locator(".key-note")
    expect(note).to_have_text("Scroll the preview to its end before approving.")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    button(found, "Approve").click()  # a click waits for it too
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    preview.evaluate("(pre) => { pre.scrollTop = pre.scrollHeight; }")
    page.evaluate(f"document.getElementById('tool-call-{approval.tool_call_id}').scrollIntoView({{block: 'end'}})")
    page.keyboard.press("1")

    decided(approval, "approved")


def test_a_decided_card_is_one_line_and_one_fold(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt", width=390, height=844)
    pending_card(page, approval)
    page.keyboard.press("1")
    decided(approval, "approved")
    done = page.locator(f'[data-approval-id="{approval.pk}"][data-status="succeeded"]')
    expect(done.locator(".decided")).to_contain_text("✓ Approved by alice via chat")

    expect(done.locator("details")).to_have_count(1)
    expect(done.locator("details > summary")).to_have_text("Details")
    box = done.bounding_box()
    assert box["height"] < 140, box  # title, one line, one fold: not a stack of folds
    done.locator("details > summary").click()
    expect(done.locator("details")).to_contain_text("Preview, as shown when decided")
    expect(done.locator("details")).to_contain_text("Wrote 5 bytes to notes.txt.")


def test_a_stopped_call_says_so_once(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    pending_card(page, approval)
    button(page, "■ Stop").click()

    decided(approval, "cancelled")
    stopped = page.locator(f'[data-approval-id="{approval.pk}"][data-status="cancelled"]')
    expect(stopped.locator(".decided")).to_contain_text("■ Cancelled by alice via chat")
    text = stopped.inner_text()
    assert text.count("Cancelled") == 1, text


def test_respond_sends_the_agent_words_instead_and_it_answers_with_them(new_page, alice, agent, api_for):
    page, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    found = pending_card(page, approval)
    button(found, "Reject").click()
    found.locator(f"#reject-reason-{approval.pk}").fill("write it to todo.txt instead")

    button(found, "Send as the agent’s instruction").click()

    approval = decided(approval, "rejected")
    assert (approval.responded, approval.decided_via) == ("write it to todo.txt instead", "chat")
    expect(page.locator(f'[data-approval-id="{approval.pk}"] .decided')).to_contain_text("↩ Answered instead by alice via chat")
    expect(last_reply(page)).to_contain_text("write it to todo.txt instead")


def test_a_decision_reaches_the_same_users_other_tab_within_a_second(new_page, alice, agent, api_for):
    """The contract's "within 1 s" (2.05 s before): the request that stored the decision pushes the
    card itself (chat.receivers.on_approval_stored), before the worker's two hops."""
    first, [approval] = chat_with_pending(new_page, alice, api_for(alice), "write hello to notes.txt")
    second = new_page()
    log_in(second, alice)
    open_conversation(second, str(approval.conversation_id))
    watched = f'[data-approval-id="{approval.pk}"]'
    second.evaluate(
        """(selector) => new Promise((ready) => {
          const card = () => document.querySelector(selector);
          window.changedAt = null;
          new MutationObserver(() => {
            if (window.changedAt === null && card() && card().dataset.status !== "pending_approval") window.changedAt = Date.now();
          }).observe(document.body, {subtree: true, childList: true, attributes: true});
          ready();
        })""",
        watched,
    )
    pending_card(first, approval)

    pressed_at = first.evaluate("Date.now()")
    button(first.locator(watched), "Approve").click()

    expect(second.locator(watched)).not_to_have_attribute("data-status", "pending_approval")
    took = (second.evaluate("window.changedAt") - pressed_at) / 1000
    assert took < 1.0, f"the other tab showed the decision {took:.2f} s after the click"


def test_a_held_key_decides_once_never_the_card_that_takes_the_focus_next(new_page, alice, agent, api_for):
    page, [first, second] = chat_with_pending(new_page, alice, api_for(alice), "delete a.txt and b.txt", count=2)
    pending_card(page, first).focus()

    page.keyboard.down("1")  # pressed: approves the focused card
    decided(first, "approved")
    for _ in range(5):
        page.keyboard.down("1")  # held: the browser repeats it, which decides nothing
    page.keyboard.up("1")

    with pytest.raises(PlaywrightTimeout):  # no decision sent within a second
        page.wait_for_event("request", lambda request: request.method == "POST", timeout=1000)
    assert Approval.objects.get(pk=second.pk).status == Approval.Status.PENDING
