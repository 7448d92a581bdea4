"""The email link's page in Chromium on the real stack: opened with no session (as from a mail
client), a GET shows the call and decides nothing, the page's own form POSTs (CSRF included) and
decides once as the mail's recipient; a tampered link is a 403 page; a critical call asks for its
confirmation. The link's token is issued here as the worker issues it for a mail
(approvals.tokens.issue, channel "email"); mailing itself is tested in test_email_e2e.py."""
import pytest
from playwright.sync_api import expect

from approvals import tokens
from approvals.models import Approval
from tests.conftest import wait_until
from tests.e2e.browser import browser, button, new_page, page, start  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


def pending_of(conversation_id: str) -> Approval:
    return wait_until(lambda: Approval.objects.filter(conversation_id=conversation_id, status="pending").first(), timeout=20,
                      message="the approval")


def status_of(approval: Approval) -> str:
    return Approval.objects.get(pk=approval.pk).status


def test_the_link_shows_the_call_without_deciding_and_approve_decides_once(page, api_for, alice, agent):  # noqa: F811
    approval = pending_of(start(api_for(alice), "write hello to a.txt"))
    link = f"/approve/{tokens.issue(approval, alice, channel='email')}/"

    page.goto(link)
    page.reload()  # opening it twice decides nothing

    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text(f"Approve? Write a.txt (5 bytes) — asked by alice (Demo agent) #{approval.pk}")
    expect(page.locator("pre").last).to_contain_text('"path": "a.txt"')
    assert status_of(approval) == "pending"

    button(page, "Approve").click()

    expect(heading).to_have_text("Approved")
    expect(page.get_by_role("status").filter(has_text="Approved by")).to_contain_text("Approved by alice via email")
    wait_until(lambda: status_of(approval) == "approved", message="approved")
    page.go_back()
    page.reload()
    expect(heading).to_have_text("Already decided")
    assert Approval.objects.get(pk=approval.pk).decided_via == "email"


def test_reject_with_a_reason_on_the_reject_links_page(page, api_for, alice, agent):  # noqa: F811
    approval = pending_of(start(api_for(alice), "write hello to a.txt"))
    page.goto(f"/approve/{tokens.issue(approval, alice, channel='email', complete=False)}/?decision=reject")  # as a mail's Reject link

    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_contain_text("Reject? Write a.txt (5 bytes)")
    page.get_by_label("Reason (the agent reads it)").fill("wrong file")
    button(page, "Reject").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Rejected")
    wait_until(lambda: status_of(approval) == "rejected", message="rejected")
    assert Approval.objects.get(pk=approval.pk).rejection_reason == "wrong file"


def test_a_tampered_link_is_a_403_page_and_decides_nothing(page, api_for, alice, agent):  # noqa: F811
    approval = pending_of(start(api_for(alice), "write hello to a.txt"))
    value = tokens.issue(approval, alice, channel="email")

    response = page.goto(f"/approve/{value[:-2]}xx/")

    assert response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("This link is not valid")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    assert status_of(approval) == "pending"


def test_a_critical_call_asks_for_its_confirmation(page, api_for, alice, agent):  # noqa: F811
    approval = pending_of(start(api_for(alice), "delete all files"))
    page.goto(f"/approve/{tokens.issue(approval, alice, channel='email')}/")

    page.get_by_label("Critical: type").fill("sure")
    button(page, "Approve").click()

    expect(page.get_by_role("alert")).to_contain_text("Type the confirmation exactly as shown")
    assert status_of(approval) == "pending"
    page.get_by_label("Critical: type").fill(approval.confirmation_hint)
    button(page, "Approve").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Approved")
    wait_until(lambda: status_of(approval) == "approved", message="approved")
