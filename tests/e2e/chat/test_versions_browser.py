"""A typed reply decides only what the page showed (issue 22): in Chromium, a page that missed the
push of a new pending call sends what it rendered, and its "yes" decides nothing."""
import re

import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from chat.models import Message
from tests.conftest import wait_until
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    browser,
    card,
    decide,
    log_in,
    new_page,
    open_conversation,
    page,
    say,
    start,
    wait_for_pending,
    wait_for_status,
)
from tests.e2e.chat.test_browser import SocketProxy

pytestmark = pytest.mark.e2e


def test_a_typed_yes_does_not_decide_a_call_the_page_had_not_shown(page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "write one to a.txt")
    [first] = wait_for_pending(conversation_id, 1)
    proxy = SocketProxy(page)
    page.route_web_socket(re.compile(r"/ws/conversations/"), proxy)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    expect(card(page, "write_file", "a.txt")).to_have_attribute("data-status", "pending_approval")

    # Elsewhere (another tab, a program): the first call is approved and the agent asks for another.
    # This page misses both pushes, so it still shows the first call waiting.
    proxy.lose_pushes()
    decide(api, first)
    wait_for_status(conversation_id, "idle")
    say(api, conversation_id, "write two to b.txt")
    [second] = wait_for_pending(conversation_id, 1)
    expect(page.locator("html")).to_have_attribute("data-lost-pushes", re.compile(r"[1-9]"))

    message_box = page.get_by_label("Message", exact=True)
    message_box.fill("yes")
    message_box.press("Enter")

    wait_until(
        lambda: Message.objects.filter(conversation_id=conversation_id, role="system", content__contains="had not shown").first(),
        timeout=15, message="the notice that nothing was decided",
    )
    second.refresh_from_db()
    assert second.status == Approval.Status.PENDING, "a yes typed over the first call approved the second"
    # Once the page catches up it shows the second call waiting, and the notice.
    proxy.drop()
    expect(card(page, "write_file", "b.txt")).to_have_attribute("data-status", "pending_approval")
    expect(page.locator("#messages")).to_contain_text("had not shown")
