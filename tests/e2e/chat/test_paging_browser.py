"""A long conversation in Chromium (finding 12 of issue 11): the page shows the newest 50 messages,
"Load earlier messages" prepends the page before in order, a pushed message still appends, and a
reconnect re-renders the newest page. Without JavaScript the same control is a plain link."""
import re

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from chat.models import Conversation, Message
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    TIMEOUT_MS,
    browser,
    log_in,
    new_page,
    open_conversation,
    page,
    say,
    status_bar,
    wait_for_live,
    wait_for_status,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def conversation(e2e, alice, agent) -> Conversation:
    """120 messages, "message 1" to "message 120", written directly (and committed: see `e2e`)."""
    conversation = Conversation.objects.create(owner=alice, agent=agent, title="a long one")
    Message.objects.bulk_create(
        Message(conversation=conversation, position=i, role="user" if i % 2 else "assistant", content=f"message {i}")
        for i in range(1, 121)
    )
    return conversation


def texts(page: Page) -> list[str]:
    return page.locator("#messages .message-content").all_text_contents()


def numbered(first: int, last: int) -> list[str]:
    return [f"message {i}" for i in range(first, last + 1)]


def load_earlier(page: Page):
    return page.get_by_role("link", name="Load earlier messages")


def test_load_earlier_prepends_the_older_messages_in_order_and_pushes_still_append(page, alice, conversation, api_for):
    log_in(page, alice)
    open_conversation(page, conversation.pk)
    page.evaluate("window.sameDocument = true")  # gone if a click navigates
    shown = page.locator("#messages .message-content")
    expect(shown).to_have_count(50)
    assert texts(page) == numbered(71, 120)

    load_earlier(page).click()
    expect(shown).to_have_count(100)
    assert texts(page) == numbered(21, 120)
    load_earlier(page).click()
    expect(shown).to_have_count(120)
    assert texts(page) == numbered(1, 120)
    expect(load_earlier(page)).to_have_count(0)
    assert page.evaluate("window.sameDocument") is True and page.url.endswith(f"/conversations/{conversation.pk}/")

    say(api_for(alice), str(conversation.pk), "what is 2 + 2")
    expect(shown.last).to_have_text("I did calculate 2 + 2: 2 + 2 = 4")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    assert texts(page)[:121] == numbered(1, 120) + ["what is 2 + 2"]
    assert page.evaluate("window.sameDocument") is True
    wait_for_status(str(conversation.pk), Conversation.Status.IDLE)
    stored = list(conversation.messages.order_by("position").values_list("content", flat=True))
    assert [t for t in texts(page)] == [c for c in stored if c]  # every stored message, once, in order


class DroppableSocket:
    """Passes the page's conversation socket through to daphne; `drop()` closes it with 1012, after
    which the htmx ws extension reconnects by itself (see SocketProxy in test_browser.py)."""

    def __init__(self):
        self.routes: list[WebSocketRoute] = []

    def __call__(self, route: WebSocketRoute) -> None:
        self.routes.append(route)
        server = route.connect_to_server()
        server.on_message(route.send)

    def drop(self) -> None:
        self.routes[-1].close(code=1012, reason="Service Restart")


def test_a_reconnect_re_renders_the_newest_page_with_its_control(page, alice, conversation):
    socket = DroppableSocket()
    page.route_web_socket(re.compile(r"/ws/conversations/"), socket)
    log_in(page, alice)
    open_conversation(page, conversation.pk)
    load_earlier(page).click()
    expect(page.locator("#messages .message-content")).to_have_count(100)

    socket.drop()
    wait_for_live(page, opens=2)

    expect(page.locator("#messages .message-content")).to_have_count(50)
    assert texts(page) == numbered(71, 120)
    expect(load_earlier(page)).to_have_attribute("href", f"/conversations/{conversation.pk}/?before=71")


def test_without_javascript_load_earlier_is_a_link_to_the_page_before(browser, e2e, alice, conversation):
    context = browser.new_context(base_url=e2e.base_url, java_script_enabled=False)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        page = context.new_page()
        log_in(page, alice)
        page.goto(f"/conversations/{conversation.pk}/")
        assert texts(page) == numbered(71, 120)

        load_earlier(page).click()
        expect(page).to_have_url(re.compile(r"\?before=71$"))
        assert texts(page) == numbered(21, 70)
        page.get_by_role("link", name="Back to the newest messages").click()
        expect(page).to_have_url(re.compile(rf"/conversations/{conversation.pk}/$"))
        assert texts(page) == numbered(71, 120)
    finally:
        context.close()
