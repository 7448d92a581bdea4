"""Passkeys where the README sends people (issue 38, item 8), in Chromium. WebAuthn refuses an IP
address as the relying party: at http://127.0.0.1:<port>/ the profile's passkeys section says so
before anyone tries, offers no Add, and links the same page at localhost; there, with a virtual
authenticator (CDP WebAuthn, as tests/e2e/approvals/test_stepup_browser.py), a passkey registered
is confirmed on the page and listed without a reload (axe-core finds nothing serious in either
state, at 1280 and 390 px). A card's passkey step says the same at 127.0.0.1 and approves nothing.

Not a *_browser.py: CI runs it on PostgreSQL too (bin/run-tests), for the registration it makes."""
import re

import pytest
from playwright.sync_api import Page, expect

from approvals.models import Approval
from chat.models import Agent
from stepup.models import Passkey
from tests.e2e.approvals.test_a11y_browser import assert_accessible
from tests.e2e.browser import (  # noqa: F401  (browser is a fixture)
    TIMEOUT_MS,
    WATCH_SOCKET,
    browser,
    button,
    card,
    log_in,
    open_conversation,
    start,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e

REFUSED = "Passkeys need a name, not an IP address: browsers refuse 127.0.0.1 as a passkey's site."


@pytest.fixture
def at_ip(browser, e2e):
    """A page at http://127.0.0.1:<port> (the stack's own address) with a virtual authenticator,
    which stays with the page when it follows a link to localhost."""
    assert e2e.base_url.startswith("http://127.0.0.1:")
    context = browser.new_context(base_url=e2e.base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(WATCH_SOCKET)
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserVerified": True, "automaticPresenceSimulation": True,
    }})
    yield page
    context.close()


def localhost(e2e, path: str) -> str:
    return e2e.base_url.replace("127.0.0.1", "localhost") + path


def test_at_127_0_0_1_the_page_sends_you_to_localhost_where_a_passkey_registers_on_the_page(e2e, at_ip: Page, alice):
    page = at_ip
    log_in(page, alice)
    page.goto("/profile/")
    section = page.locator("#passkeys")

    explained = section.locator(".passkey-elsewhere")
    expect(explained).to_contain_text(REFUSED)
    link = explained.get_by_role("link", name=localhost(e2e, "/profile/"))
    expect(link).to_have_attribute("href", localhost(e2e, "/profile/#passkeys"))
    expect(button(section, "Add a passkey")).to_be_disabled()
    expect(section.get_by_label("Your password")).to_be_disabled()
    assert_accessible(page, "the passkeys section at 127.0.0.1")
    page.set_viewport_size({"width": 1280, "height": 900})

    # The link: localhost has a session of its own, so the login comes first, then the same page.
    link.click()
    expect(page).to_have_url(re.compile(re.escape(localhost(e2e, "/accounts/login/")) + r"\?next=/profile/"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(localhost(e2e, "/profile/"))

    expect(section.locator(".passkey-elsewhere")).to_have_count(0)
    expect(section).to_contain_text("No passkey yet.")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    section.get_by_label("Name").fill("virtual laptop")
    section.get_by_label("Your password").fill("alice-password")
    button(section, "Add a passkey").click()

    expect(section.get_by_role("status")).to_have_text(
        "Passkey \u201cvirtual laptop\u201d registered. Approvals that need a passkey will ask for it."
    )
    [passkey] = Passkey.objects.filter(user=alice)
    listed = section.locator(f"#passkey-{passkey.pk}")
    expect(listed).to_contain_text("virtual laptop")
    expect(listed).to_contain_text("never used")
    expect(section).not_to_contain_text("No passkey yet.")
    expect(section.get_by_label("Your password")).to_have_value("")
    assert page.evaluate("window.sameDocument") is True
    assert_accessible(page, "the passkeys section with the passkey just registered")

    # The row added is a working one: its Remove removes it.
    button(listed, "Remove passkey virtual laptop").click()
    expect(section).to_contain_text("No passkey yet.")
    assert not Passkey.objects.filter(user=alice).exists()


def test_at_127_0_0_1_a_cards_passkey_step_says_where_and_approves_nothing(e2e, at_ip: Page, alice, agent, api_for):
    Agent.objects.filter(pk=agent.pk).update(step_up_from_risk="critical")
    page = at_ip
    log_in(page, alice)
    conversation_id = start(api_for(alice), "delete all files")
    [approval] = wait_for_pending(conversation_id, 1)

    open_conversation(page, conversation_id)
    wipe = card(page, "delete_all_files")
    note = wipe.locator(".step-up-note")
    expect(note).to_have_text("with your passkey only at localhost")
    here = localhost(e2e, f"/conversations/{conversation_id}/")
    expect(note.get_by_role("link")).to_have_attribute("href", re.compile("^" + re.escape(here)))

    page.locator(f"#confirm-{approval.pk}").fill("DELETE")
    button(wipe, "Approve").click()
    refused = wipe.locator(".step-up-status")
    expect(refused).to_contain_text(REFUSED)
    expect(refused.get_by_role("link", name=localhost(e2e, ""))).to_have_attribute("href", re.compile("^" + re.escape(here)))
    expect(button(wipe, "Approve")).to_be_enabled()
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.step_up_assertion == ""
