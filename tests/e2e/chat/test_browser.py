"""The pages in Chromium, clicking the real buttons, against the real stack (daphne, a Celery worker,
Redis, the scripted model). Each test checks the page and then the stored rows."""
import re
import struct
from pathlib import Path

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from approvals.models import Approval
from chat.scripted import SUGGESTIONS
from chat.models import Conversation, Message, ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    browser,
    button,
    card,
    conversation_id_of,
    decide,
    last_reply,
    log_in,
    new_page,
    open_conversation,
    page,
    say,
    start,
    start_with_files,
    status_bar,
    wait_for_live,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e

APPROVE_ALL = re.compile(r"^Approve all")
DECISION_BUTTONS = re.compile(r"^(Approve|Reject)$")


def approval_of(conversation_id: str, path: str) -> Approval:
    return Approval.objects.select_related("decided_by", "tool_call").get(
        conversation_id=conversation_id, tool_call__name="delete_file", tool_call__arguments__path=path
    )


def test_each_file_is_written_once_its_card_is_approved(e2e, page, alice, agent):
    log_in(page, alice)
    page.get_by_label("Agent", exact=True).select_option(label="Demo agent")
    page.get_by_label("Message", exact=True).fill("write one to a.txt")
    button(page, "Start").click()
    wait_for_live(page)
    conversation_id = conversation_id_of(page)
    sandbox = e2e.sandbox_root / conversation_id

    first = card(page, "write_file", "a.txt")
    expect(first).to_have_attribute("data-status", "pending_approval")
    expect(status_bar(page)).to_have_attribute("data-status", "waiting_for_approval")
    assert not (sandbox / "a.txt").exists()
    button(first, "Approve").click()
    expect(first).to_have_attribute("data-status", "succeeded")
    expect(first).to_contain_text("Succeeded")
    expect(first).to_contain_text("Approved by alice via chat")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    expect(last_reply(page)).to_contain_text("I did write a.txt: Wrote 3 bytes to a.txt.")

    page.get_by_label("Message", exact=True).fill("write two to b.txt")
    button(page, "Send").click()
    second = card(page, "write_file", "b.txt")
    button(second, "Approve").click()
    expect(second).to_have_attribute("data-status", "succeeded")
    expect(second).to_contain_text("Succeeded")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")

    assert (sandbox / "a.txt").read_text() == "one" and (sandbox / "b.txt").read_text() == "two"
    calls = ToolCall.objects.filter(message__conversation_id=conversation_id).select_related("approval__decided_by")
    assert [(c.arguments["path"], c.status) for c in calls] == [("a.txt", "succeeded"), ("b.txt", "succeeded")]
    assert {(c.approval.status, c.approval.decided_by.username, c.approval.decided_via) for c in calls} == {
        ("approved", "alice", "chat")
    }
    page.goto("/")
    listed = page.locator(".conversation-list li").filter(has_text="write one to a.txt")
    expect(listed.locator(".badge")).to_have_text("Idle")


def test_a_rejected_card_keeps_its_file_and_the_reply_quotes_the_reason(e2e, page, alice, agent, api_for):
    conversation_id = start_with_files(api_for(alice), {"a.txt": "one", "b.txt": "two"})
    reason = 'I still need a.txt for the "Q3 <draft>" & more'
    log_in(page, alice)
    open_conversation(page, conversation_id)

    message_box = page.get_by_label("Message", exact=True)
    message_box.fill("delete a.txt and b.txt")
    message_box.press("Enter")
    delete_a, delete_b = card(page, "delete_file", "a.txt"), card(page, "delete_file", "b.txt")
    expect(delete_a).to_have_attribute("data-status", "pending_approval")
    expect(delete_b).to_have_attribute("data-status", "pending_approval")
    expect(button(page, "Approve all (2)")).to_be_visible()

    button(delete_a, "Reject").click()
    expect(delete_a.get_by_label("Reason for rejecting (optional)")).to_be_focused()
    page.keyboard.type(reason)  # where the focus is: the reason field
    button(delete_a, "Confirm reject").click()
    expect(delete_a).to_have_attribute("data-status", "rejected")
    expect(delete_a).to_contain_text("Rejected by alice via chat")
    expect(delete_a).to_contain_text(f"“{reason}”")
    expect(page.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)
    button(delete_b, "Approve").click()

    expect(delete_b).to_have_attribute("data-status", "succeeded")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    expect(last_reply(page)).to_have_text(
        f"I did not delete a.txt (Rejected by alice: {reason}). I did delete b.txt: Deleted b.txt."
    )
    expect(page.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)
    sandbox = e2e.sandbox_root / conversation_id
    assert (sandbox / "a.txt").read_text() == "one" and not (sandbox / "b.txt").exists()
    rejected, approved = approval_of(conversation_id, "a.txt"), approval_of(conversation_id, "b.txt")
    assert (rejected.status, rejected.rejection_reason, rejected.decided_via) == ("rejected", reason, "chat")
    assert (approved.status, approved.tool_call.status) == ("approved", "succeeded")


def test_approve_all_approves_every_pending_card_of_the_turn(e2e, page, alice, agent, api_for):
    conversation_id = start_with_files(api_for(alice), {"c.txt": "three", "d.txt": "four"})
    log_in(page, alice)
    open_conversation(page, conversation_id)
    page.get_by_label("Message", exact=True).fill("delete c.txt and d.txt")
    button(page, "Send").click()

    button(page, "Approve all (2)").click()

    for path in ("c.txt", "d.txt"):
        expect(card(page, "delete_file", path)).to_have_attribute("data-status", "succeeded")
        expect(card(page, "delete_file", path)).to_contain_text("Approved by alice via chat")
    expect(page.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    approvals = [approval_of(conversation_id, path) for path in ("c.txt", "d.txt")]
    assert [(a.status, a.decided_by.username, a.decided_via) for a in approvals] == [("approved", "alice", "chat")] * 2
    assert not list((e2e.sandbox_root / conversation_id).iterdir())


def test_a_second_tab_sees_each_decision_without_reloading(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"a.txt": "one", "b.txt": "two"})
    say(api, conversation_id, "delete a.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    alices, bobs = new_page(), new_page()
    for tab, user in ((alices, alice), (bobs, bob)):
        log_in(tab, user)
        open_conversation(tab, conversation_id)
        tab.evaluate("window.sameDocument = true")  # gone if the page reloads

    button(card(alices, "delete_file", "a.txt"), "Reject").click()
    button(card(alices, "delete_file", "a.txt"), "Confirm reject").click()
    seen_by_bob = card(bobs, "delete_file", "a.txt")
    expect(seen_by_bob).to_have_attribute("data-status", "rejected")
    expect(seen_by_bob).to_contain_text("Rejected by alice via chat")
    expect(seen_by_bob.get_by_role("button", name=DECISION_BUTTONS)).to_have_count(0)
    expect(bobs.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)
    expect(status_bar(alices)).to_contain_text("type “yes” or “no, because …”")  # one left: the bar counts again

    button(card(bobs, "delete_file", "b.txt"), "Approve").click()
    seen_by_alice = card(alices, "delete_file", "b.txt")
    expect(seen_by_alice).to_have_attribute("data-status", "succeeded")
    expect(seen_by_alice).to_contain_text("Approved by bob via chat")
    expect(seen_by_alice.get_by_role("button", name=DECISION_BUTTONS)).to_have_count(0)
    for tab in (alices, bobs):
        expect(status_bar(tab)).to_have_attribute("data-status", "idle")
        expect(last_reply(tab)).to_contain_text("I did not delete a.txt (Rejected by alice.)")
        assert tab.evaluate("window.sameDocument") is True
        expect(tab.locator("html")).to_have_attribute("data-live-refreshes", "1")  # pushed, not re-fetched
    rejected, approved = approval_of(conversation_id, "a.txt"), approval_of(conversation_id, "b.txt")
    assert (rejected.status, rejected.decided_by.username) == ("rejected", "alice")
    assert (approved.status, approved.decided_by.username, approved.decided_via) == ("approved", "bob", "chat")


def test_a_reload_shows_decisions_as_stored_and_buttons_only_on_pending_cards(page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"a.txt": "one"})
    say(api, conversation_id, "delete a.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    button(card(page, "delete_file", "a.txt"), "Reject").click()
    page.keyboard.type("not yet")
    button(card(page, "delete_file", "a.txt"), "Confirm reject").click()
    expect(card(page, "delete_file", "a.txt")).to_have_attribute("data-status", "rejected")

    page.reload()
    wait_for_live(page)

    written, delete_a, delete_b = card(page, "write_file"), card(page, "delete_file", "a.txt"), card(page, "delete_file", "b.txt")
    expect(written).to_have_attribute("data-status", "succeeded")
    expect(written).to_contain_text("Approved by alice via api")
    expect(written.get_by_role("button")).to_have_count(0)
    expect(delete_a).to_have_attribute("data-status", "rejected")
    expect(delete_a).to_contain_text("Rejected by alice via chat")
    expect(delete_a).to_contain_text("“not yet”")
    expect(delete_a.get_by_role("button")).to_have_count(0)
    expect(delete_b).to_have_attribute("data-status", "pending_approval")
    expect(button(delete_b, "Approve")).to_be_visible()
    expect(button(delete_b, "Reject")).to_be_visible()
    expect(page.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)  # one pending call left
    expect(status_bar(page)).to_have_attribute("data-status", "waiting_for_approval")
    rejected, pending = approval_of(conversation_id, "a.txt"), approval_of(conversation_id, "b.txt")
    assert (rejected.status, rejected.rejection_reason, pending.status) == ("rejected", "not yet", "pending")
    assert Conversation.objects.get(pk=conversation_id).status == "waiting_for_approval"


def test_the_list_shows_each_conversations_status(page, alice, agent, api_for):
    api = api_for(alice)
    waiting = start(api, "delete a.txt and b.txt")
    idle = start(api, "what is 2 + 2")
    wait_for_pending(waiting, 2)
    wait_for_status(idle, "idle")

    log_in(page, alice)  # lands on the list

    rows = page.locator(".conversation-list li")
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="delete a.txt and b.txt").locator(".badge")).to_have_text("● Waiting for approval (2)")
    expect(rows.filter(has_text="what is 2 + 2").locator(".badge")).to_have_text("Idle")
    rows.filter(has_text="delete a.txt and b.txt").get_by_role("link").click()
    wait_for_live(page)
    assert conversation_id_of(page) == waiting
    expect(page.locator('article[data-status="pending_approval"]')).to_have_count(2)


class SocketProxy:
    """Passes the page's conversation socket through to daphne (Playwright's route_web_socket).

    `lose_pushes()` makes the current connection swallow what the server sends, as a half-open
    connection that neither side has noticed yet would; the page counts the lost frames on
    <html data-lost-pushes> so the test can wait for them. `drop()` then closes the connection on
    the page's side with 1012 (Service Restart), one of the codes after which the htmx ws extension
    reconnects by itself (after a random backoff under a second); the next connection goes through a
    faithful proxy again. So the decision is stored and its push lost before the page can reconnect.
    (Simpler ways do not work: Chromium keeps loopback sockets open under context.set_offline(True),
    and page JS may only close a socket with codes after which the extension does not reconnect.)
    """

    def __init__(self, page: Page):
        self.page = page
        self.routes: list[WebSocketRoute] = []
        self.losing: WebSocketRoute | None = None
        self.lost: list[str] = []

    def __call__(self, route: WebSocketRoute) -> None:
        self.routes.append(route)
        route.connect_to_server().on_message(lambda message: self._from_server(route, message))

    def _from_server(self, route: WebSocketRoute, message: str) -> None:
        if route is not self.losing:
            route.send(message)
            return
        self.lost.append(message)
        self.page.evaluate("(n) => { document.documentElement.dataset.lostPushes = n; }", len(self.lost))

    def lose_pushes(self) -> None:
        self.losing = self.routes[-1]

    def drop(self) -> None:
        self.routes[-1].close(code=1012, reason="Service Restart")


def test_a_reconnected_socket_catches_up_on_decisions_it_missed(page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete x.txt and y.txt")
    delete_x, delete_y = wait_for_pending(conversation_id, 2)
    proxy = SocketProxy(page)
    page.route_web_socket(re.compile(r"/ws/conversations/"), proxy)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    page.evaluate("window.sameDocument = true")  # gone if the page reloads

    proxy.lose_pushes()
    decide(api, delete_x, "reject", "decided while you were away")
    # The deciding request's push, then the worker's: neither reaches the page.
    expect(page.locator("html")).to_have_attribute("data-lost-pushes", re.compile(r"[1-9]"))
    assert 'data-status="rejected"' in proxy.lost[0]  # the pushed card never reached the page
    expect(card(page, "delete_file", "x.txt")).to_have_attribute("data-status", "pending_approval")
    proxy.drop()

    wait_for_live(page, opens=2)
    missed = card(page, "delete_file", "x.txt")
    expect(missed).to_have_attribute("data-status", "rejected")
    expect(missed).to_contain_text("“decided while you were away”")
    expect(missed.get_by_role("button", name=DECISION_BUTTONS)).to_have_count(0)
    expect(page.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)
    assert page.evaluate("window.sameDocument") is True
    assert len(proxy.routes) == 2
    assert ToolCall.objects.get(pk=delete_x.tool_call_id).status == "rejected"

    decide(api, delete_y)  # the new connection carries pushes again
    expect(card(page, "delete_file", "y.txt")).to_have_attribute("data-status", "failed")  # no y.txt to delete
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    expect(page.locator("html")).to_have_attribute("data-live-refreshes", "2")  # pushed, not re-fetched
    assert ToolCall.objects.get(pk=delete_y.tool_call_id).status == "failed"


def test_a_push_that_lands_while_the_page_rereads_is_not_undone_by_the_read(page, alice, agent, api_for):
    """On reconnect the page re-reads the conversation. A decision pushed while that read is in
    flight is newer than what the read brings back: the page reads again rather than show the
    older state. The read is held by the test: answered with what the database said when it was
    sent (x.txt pending), only after the pushed card (x.txt rejected) is on the page."""
    api = api_for(alice)
    conversation_id = start(api, "delete x.txt and y.txt")
    delete_x, _ = wait_for_pending(conversation_id, 2)
    proxy = SocketProxy(page)
    page.route_web_socket(re.compile(r"/ws/conversations/"), proxy)
    log_in(page, alice)
    open_conversation(page, conversation_id)

    held = []

    def hold_the_first_read(route):
        if held:
            route.continue_()
        else:
            held.append((route, route.fetch()))  # what the database says now, answered later

    page.route(re.compile(rf"/conversations/{conversation_id}/$"), hold_the_first_read)
    proxy.drop()
    expect(page.locator("html")).to_have_attribute("data-ws-opens", "2")
    wait_until(lambda: page.evaluate("true") and held, timeout=15, message="the page's re-read to be sent")

    decide(api, delete_x, "reject", "pushed while the page was reading")
    expect(card(page, "delete_file", "x.txt")).to_have_attribute("data-status", "rejected")
    route, stale = held[0]
    assert 'data-status="pending_approval"' in stale.text()
    route.fulfill(response=stale)

    # The held read, then at least one more (the loop's own pushes after the rejection, landing while
    # that one is in flight, may ask for another); never the stale read left standing.
    wait_until(lambda: int(page.locator("html").get_attribute("data-live-refreshes") or 0) >= 3, timeout=15,
               message="the page to read again after the stale read")
    expect(page.locator("#conversation-live[aria-busy]")).to_have_count(0)
    expect(card(page, "delete_file", "x.txt")).to_have_attribute("data-status", "rejected")
    expect(card(page, "delete_file", "x.txt")).to_contain_text("pushed while the page was reading")


def test_typing_approve_all_with_the_count_approves_every_pending_call(e2e, page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"a.txt": "one", "b.txt": "two"})
    say(api, conversation_id, "delete a.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    expect(status_bar(page)).to_contain_text("“approve all 2”")

    message_box = page.get_by_label("Message", exact=True)
    message_box.fill("approve all 2")
    message_box.press("Enter")

    for path in ("a.txt", "b.txt"):
        expect(card(page, "delete_file", path)).to_have_attribute("data-status", "succeeded")
        expect(card(page, "delete_file", path)).to_contain_text("Approved by alice via text")
    expect(page.get_by_role("button", name=APPROVE_ALL)).to_have_count(0)
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    expect(page.locator("#messages .message-user").filter(has_text="approve all 2")).to_contain_text("decision")
    approvals = [approval_of(conversation_id, path) for path in ("a.txt", "b.txt")]
    assert [(a.status, a.decided_by.username, a.decided_via) for a in approvals] == [("approved", "alice", "text")] * 2
    assert not list((e2e.sandbox_root / conversation_id).iterdir())
    typed = Message.objects.get(conversation_id=conversation_id, role="user", content="approve all 2")
    assert typed.in_model_context is False


def test_markup_in_tool_arguments_is_shown_as_text(e2e, page, alice, agent):
    markup = "<img src=x onerror=alert(1)>"
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, alice)
    page.get_by_label("Message", exact=True).fill(f"write {markup} to x.html")
    button(page, "Start").click()
    wait_for_live(page)
    conversation_id = conversation_id_of(page)

    expect(card(page, "write_file", "x.html")).to_have_count(1)
    written = page.locator(f'#{card(page, "write_file", "x.html").get_attribute("id")}')  # pinned: its text is checked
    expect(written.locator("pre.arguments")).to_contain_text(f'"content": "{markup}"')
    expect(written.locator(".preview pre")).to_contain_text(markup)  # the preview, as text too
    expect(written.locator("img")).to_have_count(0)
    expect(page.locator("#messages .message-user").first).to_have_text(f"You write {markup} to x.html", use_inner_text=True)
    button(written, "Approve").click()  # the pushed card is rendered by the same partial
    expect(written).to_have_attribute("data-status", "succeeded")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    expect(written.locator("pre").first).to_contain_text(markup)
    expect(page.locator("img")).to_have_count(0)
    page.goto("/")
    expect(page.get_by_role("link", name=f"write {markup} to x.html")).to_be_visible()
    expect(page.locator("img")).to_have_count(0)

    assert dialogs == []
    assert (e2e.sandbox_root / conversation_id / "x.html").read_text() == markup
    assert ToolCall.objects.get(message__conversation_id=conversation_id).arguments["content"] == markup


OPEN_SOCKET = """
(path) => new Promise((resolve) => {
  const socket = new WebSocket(`ws://${location.host}${path}`);
  let opened = false;
  socket.onopen = () => { opened = true; socket.close(1000); };
  socket.onclose = (event) => resolve({opened, code: event.code});
})
"""


def test_another_user_gets_a_404_page_and_a_refused_socket(new_page, alice, mallory, agent, api_for):
    conversation_id = start(api_for(alice), "what is 2 + 2")
    wait_for_status(conversation_id, "idle")
    socket_path = f"/ws/conversations/{conversation_id}/"
    mallorys = new_page()
    log_in(mallorys, mallory)

    response = mallorys.goto(f"/conversations/{conversation_id}/")

    assert response.status == 404
    expect(mallorys.get_by_role("heading", name="Not found")).to_be_visible()
    expect(mallorys.get_by_text("2 + 2")).to_have_count(0)
    refused = mallorys.evaluate(OPEN_SOCKET, socket_path)
    assert refused["opened"] is False and refused["code"] != 1000, refused
    alices = new_page()
    log_in(alices, alice)
    assert alices.evaluate(OPEN_SOCKET, socket_path) == {"opened": True, "code": 1000}  # the same socket, its owner
    assert Conversation.objects.get(pk=conversation_id).owner == alice


def test_the_pages_fit_a_375px_wide_screen_with_pending_cards(new_page, alice, agent, api_for):
    conversation_id = start(api_for(alice), "delete a-rather-long-name-for-a-file-on-a-phone-screen.txt and b.txt")
    wait_for_pending(conversation_id, 2)
    phone = new_page(width=375, height=812)
    log_in(phone, alice)
    open_conversation(phone, conversation_id)
    expect(phone.locator('article[data-status="pending_approval"]')).to_have_count(2)
    expect(button(phone, "Approve all (2)")).to_be_visible()

    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    button(card(phone, "delete_file", "b.txt"), "Reject").click()  # the reason form opens too
    expect(card(phone, "delete_file", "b.txt").get_by_label("Reason for rejecting (optional)")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    phone.goto("/")
    expect(phone.locator(".conversation-list li")).to_contain_text("Waiting for approval (2)")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    assert len(wait_for_pending(conversation_id, 2)) == 2


HIDE_DOCUMENT = """
(hidden) => {
  Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
  Object.defineProperty(document, "visibilityState", {configurable: true, get: () => hidden ? "hidden" : "visible"});
  document.dispatchEvent(new Event("visibilitychange"));
}
"""


def test_a_hidden_tab_counts_pending_cards_in_its_title(page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt and b.txt")
    first, _ = wait_for_pending(conversation_id, 2)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    title = page.title()
    assert title == "delete a.txt and b.txt · hitl"

    page.evaluate(HIDE_DOCUMENT, True)
    expect(page).to_have_title(f"(2) {title}")
    decide(api, first, "reject")  # a pushed card changes the count while the tab stays hidden
    expect(page).to_have_title(f"(1) {title}")
    page.evaluate(HIDE_DOCUMENT, False)
    expect(page).to_have_title(title)
    assert len(wait_for_pending(conversation_id, 1)) == 1


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def test_the_readme_tour_shows_a_written_file_and_two_deletes_waiting(e2e, page, alice, agent, tmp_path):
    """The README's first steps, as its picture shows them (docs/screenshot.png is taken by
    `make screens`; this takes one of its own, never into the repository)."""
    write, delete = SUGGESTIONS[0], SUGGESTIONS[1]
    assert (write, delete) == ("write hello to notes.txt", "delete notes.txt and todo.txt")
    log_in(page, alice)
    button(page, write).click()  # a suggestion on the list page starts the conversation
    wait_for_live(page)
    conversation_id = conversation_id_of(page)
    button(card(page, "write_file", "notes.txt"), "Approve").click()
    expect(card(page, "write_file", "notes.txt")).to_have_attribute("data-status", "succeeded")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    button(page, delete).click()  # the same suggestion on the chat page posts in this conversation
    expect(page.locator('article[data-tool="delete_file"][data-status="pending_approval"]')).to_have_count(2)
    expect(button(page, "Approve all (2)")).to_be_visible()
    expect(status_bar(page)).to_have_attribute("data-status", "waiting_for_approval")
    expect(page.locator(f"#stream-{conversation_id}")).to_be_empty()
    page.evaluate("document.activeElement.blur()")
    page.mouse.move(0, 0)

    screenshot = tmp_path / "screenshot.png"
    page.screenshot(path=screenshot, full_page=True)

    assert png_size(screenshot)[0] == 1000
    assert len(wait_for_pending(conversation_id, 2)) == 2
    assert (e2e.sandbox_root / conversation_id / "notes.txt").read_text() == "hello"
