"""Deciding with eyes open in Chromium (issue 10): edit a card's arguments and approve them, type a
critical call's confirmation, press Stop, and see an invisible character escaped on a card. Each
test clicks the real controls on the real stack, then checks the stored rows and the sandbox."""
import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from chat.models import Message, ToolCall
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    browser,
    button,
    card,
    log_in,
    new_page,
    open_conversation,
    page,
    say,
    start,
    start_with_files,
    status_bar,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: "bob@\u202emoc.elpmaxe" displays as "bob@example.com"


def test_an_edited_card_runs_the_edit_and_shows_it_as_a_diff(e2e, page, alice, agent, api_for):
    conversation_id = start(api_for(alice), "write hello to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    write = card(page, "write_file", "notes.txt")
    expect(write.locator("figure.preview-file")).to_contain_text("New file notes.txt, 5 bytes")

    write.get_by_role("link", name="Edit", exact=True).click()
    content = page.locator(f"#edit-{approval.pk}-content")
    expect(content).to_have_value("hello")
    content.fill("hello, edited")
    button(write, "Approve edited").click()

    expect(write).to_have_attribute("data-status", "succeeded")
    expect(write).to_contain_text("Approved as edited by alice via chat")
    edit = write.locator("figure.edit-diff")
    expect(edit).to_contain_text("Arguments edited by alice")
    expect(edit.locator(".diff-del .diff-code")).to_have_text("hello")  # the file's lines
    expect(edit.locator(".diff-add .diff-code")).to_have_text("hello, edited")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    assert (e2e.sandbox_root / conversation_id / "notes.txt").read_text() == "hello, edited"
    approval.refresh_from_db()
    assert (approval.status, approval.edited_arguments, approval.edited_by, approval.decided_via) == (
        "approved", {"path": "notes.txt", "content": "hello, edited"}, alice, "chat"
    )
    assert ToolCall.objects.get(pk=approval.tool_call_id).result.startswith("Note: alice changed the arguments")


def test_a_critical_card_approves_only_once_its_confirmation_is_typed(e2e, page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"a.txt": "one", "b.txt": "two"})
    sandbox = e2e.sandbox_root / conversation_id
    say(api, conversation_id, "delete all files")
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    delete_all = card(page, "delete_all_files")
    approve = button(delete_all, "Approve")
    confirmation = page.locator(f"#confirm-{approval.pk}")
    expect(delete_all.locator(".confirmation-hint")).to_have_text("DELETE")
    expect(approve).to_be_disabled()

    confirmation.fill("delete")
    expect(approve).to_be_disabled()
    assert sorted(p.name for p in sandbox.iterdir()) == ["a.txt", "b.txt"]
    confirmation.fill("DELETE")
    expect(approve).to_be_enabled()
    approve.click()

    expect(delete_all).to_have_attribute("data-status", "succeeded")
    expect(delete_all).to_contain_text("Approved by alice via chat")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    assert list(sandbox.iterdir()) == []
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "chat")


def test_stop_cancels_both_pending_cards_and_leaves_a_notice(e2e, page, alice, agent, api_for):
    conversation_id = start(api_for(alice), "delete a.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    delete_a, delete_b = card(page, "delete_file", "a.txt"), card(page, "delete_file", "b.txt")
    expect(delete_a).to_have_attribute("data-status", "pending_approval")

    button(status_bar(page), "■ Stop").click()

    for stopped in (delete_a, delete_b):
        expect(stopped).to_have_attribute("data-status", "cancelled")
        expect(stopped).to_contain_text("Cancelled by alice via chat")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    expect(status_bar(page)).to_have_text("Ready.")
    expect(button(page, "■ Stop")).to_have_count(0)
    expect(page.locator("#messages .message-system .message-content").last).to_have_text("Stopped by alice.")
    approvals = Approval.objects.filter(conversation_id=conversation_id).order_by("pk")
    assert [(a.status, a.decided_by, a.decided_via) for a in approvals] == [("cancelled", alice, "chat")] * 2
    assert [c.status for c in ToolCall.objects.filter(message__conversation_id=conversation_id)] == ["cancelled"] * 2
    wait_for_status(conversation_id, "idle")
    assert Message.objects.filter(conversation_id=conversation_id).last().content == "Stopped by alice."


def test_a_direction_changing_character_is_shown_escaped_with_a_warning(e2e, page, alice, agent, api_for):
    spoofed = f"bob@{RLO}moc.elpmaxe"
    conversation_id = start(api_for(alice), f'call send_email with {{"to": "{spoofed}", "subject": "hi"}}')
    [approval] = wait_for_pending(conversation_id, 1)
    assert approval.tool_call.arguments["to"] == spoofed  # stored as sent: only its display is escaped
    log_in(page, alice)
    open_conversation(page, conversation_id)
    email = card(page, "send_email")

    expect(email.locator("pre.arguments")).to_contain_text("bob@⟨U+202E⟩moc.elpmaxe")
    expect(email.locator(".invisible-warning")).to_be_visible()
    expect(email.locator("figure.preview-email")).to_contain_text("To: bob@⟨U+202E⟩moc.elpmaxe")
    expect(email.locator(".risk")).to_have_text("critical risk")  # raised one level from high
    assert RLO not in email.inner_text()
    assert RLO not in email.inner_html()
