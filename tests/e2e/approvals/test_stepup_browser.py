"""Step-up with passkeys in Chromium, with a virtual authenticator (Chrome DevTools Protocol
WebAuthn.addVirtualAuthenticator through Playwright's CDP session): register a passkey on the
profile page, approve a critical call with it on its card, and see it refused when the
authenticator does not verify the user; the API is refused for such a call throughout.

WebAuthn takes a domain as the relying party id, never an IP address: these pages are opened at
localhost (daphne listens on 127.0.0.1; ALLOWED_HOSTS has both)."""
import pytest
from playwright.sync_api import Page, expect

from approvals.models import Approval
from chat.models import Agent
from stepup.models import Passkey
from tests.conftest import wait_until
from tests.e2e.browser import WATCH_DASHBOARD, open_dashboard, opened
from tests.e2e.browser import (  # noqa: F401  (browser is a fixture)
    TIMEOUT_MS,
    WATCH_SOCKET,
    browser,
    button,
    card,
    log_in,
    open_conversation,
    row,
    start,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e

STEP_UP = "Approve on the site with your passkey"


@pytest.fixture
def local_page(browser, e2e):
    """A page at localhost with a virtual platform authenticator (user verification on)."""
    contexts = []

    def make(*, width: int = 1280, height: int = 900) -> tuple[Page, object, str]:
        context = browser.new_context(base_url=e2e.base_url.replace("127.0.0.1", "localhost"), viewport={"width": width, "height": height})
        context.set_default_timeout(TIMEOUT_MS)
        context.add_init_script(WATCH_SOCKET)
        contexts.append(context)
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("WebAuthn.enable")
        authenticator = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
            "isUserVerified": True, "automaticPresenceSimulation": True,
        }})["authenticatorId"]
        return page, cdp, authenticator

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def strict(agent):
    Agent.objects.filter(pk=agent.pk).update(step_up_from_risk="critical")
    return agent


def add_passkey(page: Page, name: str, password: str = "alice-password") -> None:
    page.goto("/profile/")
    section = page.locator("#passkeys")
    section.get_by_label("Name").fill(name)
    section.get_by_label("Your password").fill(password)
    button(section, "Add a passkey").click()
    expect(section.locator(".passkey", has_text=name)).to_be_visible()


def approve_on_card(page: Page, approval: Approval):
    wipe = card(page, "delete_all_files")
    page.locator(f"#confirm-{approval.pk}").fill("DELETE")
    expect(wipe.locator(".step-up-note")).to_be_visible()
    button(wipe, "Approve").click()
    return wipe


def test_a_passkey_added_on_the_profile_approves_a_critical_call_on_its_card(e2e, local_page, alice, strict, api_for):
    page, _, _ = local_page()
    log_in(page, alice)
    add_passkey(page, "virtual laptop")
    [passkey] = Passkey.objects.filter(user=alice)
    assert passkey.name == "virtual laptop"

    api = api_for(alice)
    conversation_id = start(api, "delete all files")
    [approval] = wait_for_pending(conversation_id, 1)
    refused = api.post(f"approvals/{approval.pk}/decision", {"decision": "approve", "confirmation": "DELETE"})
    assert refused.status_code == 403 and STEP_UP in refused.json()["detail"]

    open_conversation(page, conversation_id)
    wipe = approve_on_card(page, approval)

    expect(wipe).to_contain_text("Approved by alice via chat")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.step_up_assertion) == ("approved", alice, passkey.credential_id)
    passkey.refresh_from_db()
    assert passkey.last_used_at is not None


def test_without_user_verification_the_card_is_refused_and_the_call_waits(e2e, local_page, alice, strict, api_for):
    page, cdp, authenticator = local_page()
    log_in(page, alice)
    add_passkey(page, "virtual laptop")
    cdp.send("WebAuthn.setUserVerified", {"authenticatorId": authenticator, "isUserVerified": False})

    conversation_id = start(api_for(alice), "delete all files")
    [approval] = wait_for_pending(conversation_id, 1)
    open_conversation(page, conversation_id)
    wipe = approve_on_card(page, approval)

    expect(wipe.locator(".step-up-status")).to_contain_text("not approved")
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.step_up_assertion == ""


def test_an_approver_approves_a_critical_call_with_a_passkey_on_the_dashboard(e2e, local_page, alice, bob, strict, api_for):
    page, _, _ = local_page()
    page.context.add_init_script(WATCH_DASHBOARD)
    log_in(page, bob)
    add_passkey(page, "bob's key", password="bob-password")
    conversation_id = start(api_for(alice), "delete all files")
    [approval] = wait_for_pending(conversation_id, 1)

    open_dashboard(page)
    controls = opened(row(page, approval))
    controls.locator(f"#confirm-{approval.pk}").fill("DELETE")
    button(controls, "Approve").click()

    wait_until(lambda: Approval.objects.filter(pk=approval.pk, status="approved").exists(), timeout=TIMEOUT_MS / 1000, message="approved")
    approval.refresh_from_db()
    assert (approval.decided_by, approval.decided_via) == (bob, "dashboard")
    assert approval.step_up_assertion == Passkey.objects.get(user=bob).credential_id
