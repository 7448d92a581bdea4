"""Undo in Chromium on the real stack (issue 40, item 4): alice's overwrite of notes.txt ran; bob, an
approver, presses Undo on its row of the history; the undo's own card (its preview the diff back to
what was there) appears in alice's open conversation, pushed; she approves it; the worker puts the
old content back, once; the history row then says the undo ran. With HITL_SHOTS=<dir>, the states
are saved there at 1280 and 390 px."""
import pytest
from playwright.sync_api import expect

from chat.models import ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    decide,
    log_in,
    logged_in,
    new_page,
    open_conversation,
    page,
    say,
    shoot,
    start,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e


def test_undo_from_the_history_row_is_a_call_of_its_own_approved_and_run_once(new_page, alice, bob, agent, api_for, e2e):
    api = api_for(alice)
    conversation_id = start(api, "write first draft to notes.txt")
    [first] = wait_for_pending(conversation_id, 1)
    decide(api, first)
    wait_until(lambda: ToolCall.objects.filter(pk=first.tool_call_id, status="succeeded").exists(), timeout=30, message="the write")
    say(api, conversation_id, "write second draft to notes.txt")
    [second] = wait_for_pending(conversation_id, 1)
    decide(api, second)
    wait_until(lambda: ToolCall.objects.filter(pk=second.tool_call_id, status="succeeded").exists(), timeout=30, message="the overwrite")
    notes = e2e.sandbox_root / conversation_id / "notes.txt"
    assert notes.read_text() == "second draft"

    owner = new_page()
    log_in(owner, alice)
    open_conversation(owner, conversation_id)
    expect(owner.locator(f"#tool-call-{second.tool_call_id} .undo-note")).to_contain_text("Can be undone until ")

    approver = logged_in(new_page, bob)
    approver.goto("/approvals/history/")
    row = approver.locator(f"#history-{second.pk}")
    shoot(approver, "undo-history", f"#history-{second.pk}")
    button(row, "Undo").click()

    undo = wait_until(lambda: ToolCall.objects.filter(undo_of_id=second.tool_call_id).first(), timeout=30, message="the undo call")
    expect(approver).to_have_url(f"{e2e.base_url}/conversations/{conversation_id}/#tool-call-{undo.pk}")
    pushed = owner.locator(f"#tool-call-{undo.pk}")  # alice's tab, without a reload
    expect(pushed).to_contain_text(f"Undo write_file of notes.txt (call {second.tool_call_id})")
    expect(pushed.locator(".preview")).to_contain_text("removedsecond draft")  # the readable diff: back from what is there
    expect(pushed.locator(".preview")).to_contain_text("addedfirst draft")
    assert notes.read_text() == "second draft"
    shoot(owner, "undo-asked", f"#tool-call-{undo.pk}")
    button(pushed, "Approve").click()

    wait_until(lambda: ToolCall.objects.filter(pk=undo.pk, status="succeeded").exists(), timeout=30, message="the undo run")
    assert notes.read_text() == "first draft"
    expect(owner.locator(f"#tool-call-{undo.pk}")).to_have_attribute("data-status", "succeeded")
    shoot(owner, "undo-done", f"#tool-call-{undo.pk}")
    undo.refresh_from_db()
    assert (undo.approval.decided_by, undo.message.author) == (alice, bob)
    assert undo.approval.reason.startswith(f"bob asked to undo call {second.tool_call_id} (write_file).")

    approver.goto("/approvals/history/")
    expect(approver.locator(f"#history-{second.pk} .undo-line")).to_contain_text(f"Undo asked: call {undo.pk}, succeeded")
    expect(button(approver.locator(f"#history-{second.pk}"), "Undo")).to_have_count(0)
    shoot(approver, "undo-history-after", f"#history-{second.pk}")
