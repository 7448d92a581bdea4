"""The fault matrix's pages (issue 36): a chat page open on a waiting call while Redis or daphne is
killed (-9) and started again. The page's socket opens again by itself, the re-read that follows
each open shows the card as it is, and from then on pushes reach it: the card clicked after the
fault shows its outcome and the agent's reply without a reload. (The workers and beat never hold a
page's socket: their rows are test_faults.py's.)"""
import time

import pytest
from playwright.sync_api import expect

from chat.models import ToolCall
from tests.e2e.browser import TIMEOUT_MS, WATCH_SOCKET, browser, button, card, log_in, start, wait_for_live, wait_for_pending  # noqa: F401  (browser: a fixture)
from tests.e2e.conftest import Api
from tests.e2e.faults.stack import OUTAGE_SECONDS, fault_stack  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e

RECONNECT_SECONDS = 30  # htmx's ws extension backs off with jitter: up to ~2^n s after n failed tries


@pytest.mark.parametrize("fault", ["redis", "daphne"])
def test_a_page_open_through_a_fault_reconnects_and_shows_what_happens_next(fault_stack, browser, transactional_db, alice, agent, fault):
    faults = fault_stack
    context = browser.new_context(base_url=faults.base_url, viewport={"width": 1000, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(WATCH_SOCKET)
    try:
        page = context.new_page()
        log_in(page, alice)
        conversation_id = start(Api(faults.base_url, alice), f"write {fault} to fault.txt")
        wait_for_pending(conversation_id, 1)
        page.goto(f"/conversations/{conversation_id}/")
        wait_for_live(page, opens=1)
        waiting = card(page, "write_file", "fault.txt")
        expect(waiting).to_have_attribute("data-status", "pending_approval")

        for name in faults.names(fault):
            faults.kill(name)
        time.sleep(OUTAGE_SECONDS)
        for name in faults.names(fault):
            faults.start(name)

        try:
            expect(page.locator("html")).to_have_attribute("data-ws-opens", "2", timeout=RECONNECT_SECONDS * 1000)
            wait_for_live(page, opens=2)
        except AssertionError as exc:
            opens = page.locator("html").get_attribute("data-ws-opens")
            raise AssertionError(f"the page's socket opened {opens} time(s) after {fault} came back: {exc}\n{faults.tails()}") from None
        button(waiting, "Approve").click()
        expect(waiting).to_have_attribute("data-status", "succeeded")
        expect(waiting).to_contain_text("Approved by alice via chat")
        expect(page.locator("#conversation-status")).to_have_attribute("data-status", "idle")
        expect(page.locator("#messages .message-assistant .message-content").last).to_contain_text("I did write fault.txt")
        assert ToolCall.objects.get(message__conversation_id=conversation_id).status == "succeeded"
    finally:
        context.close()
    for process in faults.processes.values():
        assert process.alive(), f"{process.name} died:\n{process.tail()}"
