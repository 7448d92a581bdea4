"""The card read in one second, in Chromium at 1280 and 390 px (issue 23, item 2 and the phone's
decision bar of item 5): the title in words, one action row on one line, what Reject and Always…
open below it, the edit form's live diff, what ran after an edit, one decided line with the decider."""
import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    card,
    log_in,
    new_page,
    open_conversation,
    page,
    start,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e

# Each visible control of each action row: its label and its box's top and bottom, left and right.
ROW_BOXES = """
(row) => Array.from(row.querySelectorAll("button, a.btn")).filter((e) => e.getClientRects().length).map((e) => {
  const box = e.getBoundingClientRect();
  return {label: e.textContent.trim(), top: Math.round(box.top), bottom: box.bottom, left: box.left, right: box.right};
})
"""


def row_boxes(scope) -> list[dict]:
    return scope.locator(".action-row").evaluate(ROW_BOXES)


@pytest.mark.parametrize("width", [1280, 390])
def test_one_action_row_on_one_line_and_what_it_opens_below_it(new_page, alice, agent, api_for, width):
    conversation_id = start(api_for(alice), "delete a-rather-long-name-for-a-file.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    page = new_page(width=width, height=844)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    first = card(page, "delete_file", "a-rather-long-name-for-a-file.txt")
    expect(first.locator(".card-title")).to_have_text("Delete a-rather-long-name-for-a-file.txt")
    expect(first.locator(".risk")).to_have_text("high risk")
    expect(first.locator("pre.arguments")).to_be_hidden()  # folded: the preview comes first

    boxes = row_boxes(first)
    assert [box["label"] for box in boxes] == ["Approve1", "Reject3", "Edite"], boxes  # each with its key; no rule may approve a delete
    assert len({box["top"] for box in boxes}) == 1, boxes  # one line
    assert all(box["right"] <= width for box in boxes) and page.evaluate("document.documentElement.scrollWidth") <= width

    button(first, "Reject").click()
    reason = first.get_by_label("Reason for rejecting (optional)")
    expect(reason).to_be_visible()
    now = row_boxes(first)  # measured again: focusing the reason may scroll the page
    assert reason.bounding_box()["y"] > now[0]["bottom"]  # below the row, which stays as it was
    assert len({box["top"] for box in now}) == 1 and [box["left"] for box in now] == [box["left"] for box in boxes]

    always = button(first, "More ways to decide calls like this…")  # every way to remember, below the row
    always.click()
    expect(always).to_have_attribute("aria-expanded", "true")
    menu = first.locator(".remember")
    expect(menu).to_be_visible()
    assert menu.bounding_box()["y"] > row_boxes(first)[0]["bottom"]
    expect(menu.get_by_label("in this conversation")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    expect(always).to_have_attribute("aria-expanded", "false")


def test_on_a_phone_the_decision_bar_stays_on_screen_while_its_card_is(new_page, alice, agent, api_for):
    content = "\n".join(f"line {n} of a long note" for n in range(1, 31))
    conversation_id = start(api_for(alice), f"write {content} to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    phone = new_page(width=390, height=420)  # a phone's screen with its keyboard or browser bars up
    log_in(phone, alice)
    open_conversation(phone, conversation_id)
    write = card(phone, "write_file", "notes.txt")
    phone.evaluate(f"document.getElementById('tool-call-{approval.tool_call_id}').scrollIntoView({{block: 'start'}})")

    card_box = write.bounding_box()
    assert card_box["y"] + card_box["height"] > 420  # the card runs past the screen...
    for box in row_boxes(write):  # ...and its decision bar is on it
        assert 0 <= box["top"] and box["bottom"] <= 420, box
    assert len({box["top"] for box in row_boxes(write)}) == 1

    button(write, "Approve").click()  # the preview's box was never scrolled to its end: not yet
    expect(write.locator(".key-note")).to_have_text("Scroll the preview to its end before approving.")
    write.locator(".preview pre").evaluate("(pre) => { pre.scrollTop = pre.scrollHeight; }")
    button(write, "Approve").click()
    expect(write).to_have_attribute("data-status", "succeeded")
    expect(write.locator(".action-row")).to_have_count(0)


def test_the_edit_forms_diff_follows_the_typing_and_the_card_then_shows_what_ran(page, alice, agent, api_for):
    conversation_id = start(api_for(alice), "write hello to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    write = card(page, "write_file", "notes.txt")
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (5 bytes)")

    write.get_by_role("link", name="Edit", exact=True).click()
    content = page.locator(f"#edit-{approval.pk}-content")
    expect(content).to_have_js_property("tagName", "TEXTAREA")  # a file's content gets lines
    diff = page.locator(f"#edit-diff-{approval.pk}")
    expect(diff).to_have_text("No change yet.")
    content.press("Control+End")
    content.press_sequentially(", world")
    expect(diff.locator(".diff-del .diff-code")).to_have_text("hello")  # the file's lines, not its JSON
    expect(diff.locator(".diff-add .diff-code")).to_have_text("hello, world")
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (12 bytes)")  # the title follows the edit
    content.fill("hello")
    expect(diff).to_have_text("No change yet.")
    content.fill("hello\nagain")
    expect(diff.locator(".diff-add .diff-code")).to_have_text("again")
    expect(diff.locator(".diff-del")).to_have_count(0)

    button(write, "Approve edited").click()
    expect(write).to_have_attribute("data-status", "succeeded")
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (11 bytes)")  # what ran
    expect(write).to_have_attribute("data-title", "Write notes.txt (11 bytes)")
    ran = write.locator("details.details-fold")  # the decided card's one fold
    expect(ran.locator(".fold-label", has_text="Arguments")).to_have_text("Arguments, as edited and approved")
    expect(ran.locator("pre.arguments")).to_contain_text('"content": "hello\\nagain"')
    expect(write.locator("figure.edit-diff .diff-add .diff-code")).to_have_text("again")
    expect(write.locator(".decided")).to_have_count(1)
    expect(write.locator(".decided")).to_contain_text("✓ Approved as edited by alice via chat")


@pytest.mark.parametrize("width", [1280, 390])
def test_a_card_decided_elsewhere_is_one_line_with_the_decider_and_looks_finished(new_page, alice, bob, agent, api_for, width):
    conversation_id = start(api_for(alice), "delete a.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    alices, bobs = new_page(width=width, height=844), new_page(width=width, height=844)
    log_in(alices, alice)
    log_in(bobs, bob)
    open_conversation(alices, conversation_id)
    open_conversation(bobs, conversation_id)
    pending = card(alices, "delete_file", "a.txt")
    expect(pending).to_have_css("border-top-width", "2px")  # pending styling

    button(card(bobs, "delete_file", "a.txt"), "Reject").click()
    bobs.get_by_label("Reason for rejecting (optional)").fill("keep it")
    button(card(bobs, "delete_file", "a.txt"), "Confirm reject").click()

    expect(pending).to_have_attribute("data-status", "rejected")
    decided = pending.locator(".decided")
    expect(decided).to_have_count(1)
    expect(decided).to_have_text(__import__("re").compile(r"^⊘ Rejected by bob via chat · \d\d:\d\d:\d\d: “keep it”$"))
    expect(pending.get_by_role("button")).to_have_count(0)
    # finished: no pending styling (retried: a later push may swap the card, and a detached
    # element has no computed style)
    expect(pending).to_have_css("border-top-width", "1px")
    assert Approval.objects.get(pk=approval.pk).decided_by == bob

