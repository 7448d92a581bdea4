"""Markup from users, the model and tools is text everywhere it is shown: the chat (message, title,
arguments, result, rejection reason, notices), the list, the dashboard and the history."""
import pytest
from playwright.sync_api import Page, expect

from approvals.models import Approval
from tests.e2e.browser import browser, decide, log_in, new_page, open_conversation, say, start, wait_for_pending, wait_for_status  # noqa: F401

pytestmark = pytest.mark.e2e
PAYLOAD = '<img src=x id=pwned onerror=alert(1)><script>alert(2)</script>'


def watch_dialogs(page: Page) -> list:
    opened = []
    page.on("dialog", lambda dialog: (opened.append(dialog.message), dialog.dismiss()))
    return opened


def assert_inert(page: Page, opened: list) -> None:
    expect(page.locator("#pwned")).to_have_count(0)
    assert page.evaluate("document.querySelectorAll('main script').length") == 0
    assert opened == []


def test_payloads_in_every_field_render_as_text(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    # A title and a message, arguments and then a tool result carrying markup.
    conversation_id = start(api, f"write {PAYLOAD} to x.html")
    [write] = wait_for_pending(conversation_id, 1)
    decide(api, write)
    wait_for_status(conversation_id, "idle")
    say(api, conversation_id, "read x.html")
    wait_for_status(conversation_id, "idle")
    say(api, conversation_id, "delete x.html")  # rejected below with markup as the reason
    [delete] = wait_for_pending(conversation_id, 1)
    decide(api, delete, "reject", reason=PAYLOAD)
    wait_for_status(conversation_id, "idle")
    say(api, conversation_id, f"email bob@example.com about {PAYLOAD}")  # left pending for the dashboard
    wait_for_pending(conversation_id, 1)

    owner = new_page()
    opened = watch_dialogs(owner)
    log_in(owner, alice)
    expect(owner.get_by_text(PAYLOAD[:30]).first).to_be_visible()  # the list shows the title as text
    assert_inert(owner, opened)
    open_conversation(owner, conversation_id)
    expect(owner.locator("#messages")).to_contain_text(f"Rejected by alice: {PAYLOAD}")
    expect(owner.locator('article[data-tool="read_file"] details.result')).to_contain_text(PAYLOAD)
    assert_inert(owner, opened)

    approver = new_page()
    seen = watch_dialogs(approver)
    log_in(approver, bob)
    approver.goto("/approvals/")
    expect(approver.locator(".approval-row")).to_contain_text(PAYLOAD)
    assert_inert(approver, seen)
    approver.goto("/approvals/history/")
    expect(approver.locator("table.history")).to_contain_text(PAYLOAD)
    assert_inert(approver, seen)
    assert Approval.objects.filter(conversation_id=conversation_id, status="rejected", rejection_reason=PAYLOAD).exists()
