"""Playwright for the browser tests: Chromium, a fresh context per page, and the few steps
every test takes (log in through the real form, open a chat page and wait for its socket, set up a
conversation through the API)."""
import os
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

from approvals.models import Approval
from chat.models import Conversation
from tests.conftest import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"]
TIMEOUT_MS = 15_000

# Counts, on <html data-…>, the page's socket opens and the refreshes each open triggers
# (static/js/app.js), so that a test can wait for them with expect(). The htmx ws extension fires its
# events on the ws-connect element; they bubble to the document. Runs before the page's own scripts.
WATCH_SOCKET = """
(() => {
  const bump = (name) => {
    const data = document.documentElement.dataset;
    data[name] = String(Number(data[name] || 0) + 1);
  };
  document.addEventListener("htmx:wsOpen", () => bump("wsOpens"));
  document.addEventListener("htmx:wsAfterMessage", () => bump("wsMessages"));
  document.addEventListener("htmx:afterSettle", (event) => {
    if (event.target.id === "conversation-live") bump("liveRefreshes");
  });
})();
"""


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module's tests.

    Module- rather than session-scoped on purpose: while Playwright's sync API runs, it marks its
    asyncio loop as running in the main thread between calls. Django then refuses ORM calls there
    (SynchronousOnlyOperation, hence DJANGO_ALLOW_ASYNC_UNSAFE for exactly this span) and asgiref's
    async_to_sync refuses to run at all, which would break every later test module in the session.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            expect.set_options(timeout=TIMEOUT_MS)
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()


@pytest.fixture
def new_page(browser: Browser, e2e):
    """Opens a page in a fresh browser context (its own cookies: its own user), closed after the test."""
    contexts = []

    def make(*, width: int = 1000, height: int = 800) -> Page:
        context = browser.new_context(base_url=e2e.base_url, viewport={"width": width, "height": height})
        context.set_default_timeout(TIMEOUT_MS)
        context.add_init_script(WATCH_SOCKET)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page) -> Page:
    return new_page()


def log_in(page: Page, user) -> None:
    """Through the real login form, with the password tests/conftest.py gives each named user."""
    password = f"{user.get_username()}-password"
    _store_password_for_the_server(user, password)
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(user.get_username())
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("navigation", name="Main")).to_contain_text(user.get_username())


def _store_password_for_the_server(user, password: str) -> None:
    """tests/settings.py hashes with MD5 for speed, but daphne runs hitl.settings, which does not
    accept MD5 hashes: store the password as PBKDF2, the server's preferred hasher (so logging in
    does not make it re-hash either)."""
    user.refresh_from_db(fields=["password"])
    if not user.password.startswith(f"{PBKDF2PasswordHasher.algorithm}$"):
        hasher = PBKDF2PasswordHasher()
        user.password = hasher.encode(password, hasher.salt())
        user.save(update_fields=["password"])


def open_conversation(page: Page, conversation_id: str) -> None:
    page.goto(f"/conversations/{conversation_id}/")
    wait_for_live(page, opens=1)


def wait_for_live(page: Page, *, opens: int = 1) -> None:
    """The socket has opened `opens` times and the re-read each open triggers has landed (twice, if
    a push came in meanwhile): from here on pushes reach the page, and no re-read replaces (and so
    resets) what the test clicks next."""
    expect(page.locator("html")).to_have_attribute("data-ws-opens", str(opens))
    expect(page.locator("#conversation-live[aria-busy]")).to_have_count(0)


def conversation_id_of(page: Page) -> str:
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def card(page: Page, tool: str, path: str = "") -> Locator:
    """The tool card of `tool`, narrowed to the one whose arguments name `path`."""
    cards = page.locator(f'article[data-tool="{tool}"]')
    return cards.filter(has=page.locator("pre", has_text=f'"path": "{path}"')) if path else cards


def button(scope: Page | Locator, name: str) -> Locator:
    return scope.get_by_role("button", name=name, exact=True)


def status_bar(page: Page) -> Locator:
    return page.locator("#conversation-status")


def last_reply(page: Page) -> Locator:
    return page.locator("#messages .message-assistant .message-content").last


def row(page: Page, approval: Approval) -> Locator:
    """An approval's row on the dashboard or in the inbox."""
    return page.locator(f"#approval-row-{approval.pk}")


# --- The approvers' dashboard ---------------------------------------------------------------

# Counts, on <html data-…>, the dashboard's list re-reads that landed (the one each socket open
# triggers, one per pushed signal, and the user's filter changes), and the "refresh" triggers that
# asked for them (static/js/app.js), so a test can wait for them with expect().
WATCH_DASHBOARD = """
(() => {
  const bump = (name) => {
    const data = document.documentElement.dataset;
    data[name] = String(Number(data[name] || 0) + 1);
  };
  document.addEventListener("htmx:afterSettle", (event) => {
    if (event.target.id === "dashboard-rows") bump("dashboardRefreshes");
  });
  document.addEventListener("refresh", (event) => {
    if (event.target.id === "dashboard-filters") bump("dashboardRefreshTriggers");
  });
})();
"""

OPEN_SOCKET = """
(path) => new Promise((resolve) => {
  const socket = new WebSocket(`ws://${location.host}${path}`);
  let opened = false;
  socket.onopen = () => { opened = true; socket.close(1000); };
  socket.onclose = (event) => resolve({opened, code: event.code});
})
"""


def logged_in(new_page, user, **size) -> Page:
    """A page of its own browser context, logged in as `user`, that counts dashboard refreshes."""
    page = new_page(**size)
    page.context.add_init_script(WATCH_DASHBOARD)
    log_in(page, user)
    return page


def open_dashboard(page: Page, path: str = "/approvals/") -> None:
    """Open the dashboard and wait until its socket is open and the re-read that opening triggers has
    landed: from here on a signal reaches the page, and the rows the test clicks are the current ones."""
    page.goto(path)
    expect(page.locator("html")).to_have_attribute("data-ws-opens", "1")
    expect(page.locator("html")).to_have_attribute("data-dashboard-refreshes", "1")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads


def still_same_document(page: Page) -> bool:
    return page.evaluate("window.sameDocument") is True


def open_group_of(listed: Locator) -> Locator:
    """The row on screen: alike calls are one group, whose calls show once it is opened."""
    group = listed.locator("xpath=ancestor::article[contains(concat(' ', @class, ' '), ' approval-group ')]")
    if group.count() and group.locator(":scope > .row-open").get_attribute("open") is None:
        group.locator(":scope > .row-open > summary").click()
        expect(group.locator(":scope > .row-open")).to_have_attribute("open", "")
    return listed


def opened(listed: Locator) -> Locator:
    """The row with its card open: the inbox shows one line per call until asked (a click, or "o"),
    and a group's calls once the group is opened."""
    open_group_of(listed)
    listed.locator(":scope > .row-open > summary").click()
    expect(listed.locator(":scope > .row-open")).to_have_attribute("open", "")
    return listed


# --- Setting a conversation up through the JSON API (the `api_for` fixture) ---------------------


def start(api, text: str) -> str:
    response = api.post("conversations", {"agent": "demo", "message": text})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def say(api, conversation_id: str, text: str) -> None:
    response = api.post(f"conversations/{conversation_id}/messages", {"content": text})
    assert response.status_code == 202, response.text


def decide(api, approval: Approval, decision: str = "approve", reason: str = "") -> None:
    response = api.post(f"approvals/{approval.pk}/decision", {"decision": decision, "reason": reason})
    assert response.status_code == 200, response.text


def wait_for_status(conversation_id: str, status: str) -> Conversation:
    return wait_until(
        lambda: Conversation.objects.filter(pk=conversation_id, status=status).first(),
        timeout=TIMEOUT_MS / 1000,
        message=f"conversation {conversation_id} to be {status}",
    )


def wait_for_pending(conversation_id: str, count: int) -> list[Approval]:
    """Exactly `count` approvals pending, with the conversation waiting for them (cards pushed)."""
    wait_for_status(conversation_id, Conversation.Status.WAITING_FOR_APPROVAL)
    def pending() -> list[Approval] | None:
        found = list(Approval.objects.filter(conversation_id=conversation_id, status=Approval.Status.PENDING).order_by("pk"))
        return found if len(found) == count else None

    return wait_until(pending, timeout=TIMEOUT_MS / 1000, message=f"{count} pending approvals")


def start_with_files(api, files: dict[str, str]) -> str:
    """A conversation that wrote each file through the agent, each call approved through the API."""
    conversation_id = ""
    for name, content in files.items():
        if conversation_id:
            say(api, conversation_id, f"write {content} to {name}")
        else:
            conversation_id = start(api, f"write {content} to {name}")
        [approval] = wait_for_pending(conversation_id, 1)
        decide(api, approval)
        wait_for_status(conversation_id, Conversation.Status.IDLE)
    return conversation_id


def shoot(page: Page, name: str, selector: str = "#messages") -> None:
    """With HITL_SHOTS=<dir>: `selector` (the conversation's messages) saved there at 1280 and 390 px,
    as <name>-<width>.png, for a person to look at; without it, nothing."""
    shots = os.environ.get("HITL_SHOTS", "")
    if not shots:
        return
    Path(shots).mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.locator(selector).first.screenshot(path=f"{shots}/{name}-{width}.png")
    if size:
        page.set_viewport_size(size)
