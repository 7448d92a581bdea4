"""Claims in Chromium against the real stack (issue 25, item 5): bob claims a call in his inbox and a
second browser, carol's (another approver), sees "claimed by bob" appear on her inbox row (at
390 px) and on the card without reloading; unclaiming clears it live, and the decision ends it."""
import pytest
from playwright.sync_api import Locator, Page, expect

from approvals.models import Approval
from tests.e2e.browser import browser, decide, log_in, new_page, open_conversation, row, start, wait_for_pending  # noqa: F401  (fixtures)
from tests.e2e.browser import logged_in, open_dashboard, still_same_document

pytestmark = pytest.mark.e2e


def claim_button(page: Page, approval: Approval, name: str) -> Locator:
    return page.locator(f"#claim-{approval.pk}").get_by_role("button", name=name, exact=True)


def test_a_claim_is_seen_live_by_another_approver_on_the_row_and_the_card_until_unclaimed_or_decided(
    new_page, alice, bob, carol, agent, api_for
):
    conversation_id = start(api_for(alice), "delete a.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    bobs = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(bobs)
    carols_inbox = logged_in(new_page, carol, width=390, height=844)
    open_dashboard(carols_inbox)
    carols_card = new_page(width=1280, height=900)
    log_in(carols_card, carol)
    open_conversation(carols_card, conversation_id)
    card_line = carols_card.locator(f"#claim-{approval.pk}")
    expect(card_line).not_to_contain_text("claimed by")

    row(bobs, approval).locator(".row-summary").click()
    claim_button(bobs, approval, "Claim").click()

    expect(row(carols_inbox, approval).locator(".row-claim")).to_have_text("claimed by bob")
    expect(row(carols_inbox, approval).locator(".row-claim")).to_be_visible()  # on the closed row, at 390 px
    expect(card_line).to_contain_text("claimed by bob")
    expect(claim_button(carols_card, approval, "Unclaim")).to_be_visible()
    assert Approval.objects.get(pk=approval.pk).claimed_by == bob

    claim_button(bobs, approval, "Unclaim").click()

    expect(row(carols_inbox, approval).locator(".row-claim")).to_have_count(0)
    expect(card_line).not_to_contain_text("claimed by")
    expect(claim_button(carols_card, approval, "Claim")).to_be_visible()
    assert Approval.objects.get(pk=approval.pk).claimed_by is None

    claim_button(bobs, approval, "Claim").click()
    expect(card_line).to_contain_text("claimed by bob")
    decide(api_for(bob), approval, "reject", "not today")

    expect(row(carols_inbox, approval)).to_have_count(0)  # decided: off the inbox
    expect(carols_card.locator(f"#approval-{approval.pk}")).to_contain_text("Rejected by bob")
    expect(carols_card.locator(f"#tool-call-{approval.tool_call_id}")).not_to_contain_text("claimed by")
    assert still_same_document(carols_inbox)
    stored = Approval.objects.get(pk=approval.pk)
    assert stored.status == Approval.Status.REJECTED and stored.claimed_by is None


def test_a_card_that_arrives_by_push_never_offers_the_owner_claim_on_their_own_call(new_page, alice, bob, agent, api_for):
    """The pushed card is rendered for nobody in particular (issue 38, item 4): its Claim is marked
    for others, and the owner's page hides it, while an approver reading along keeps it."""
    conversation_id = start(api_for(alice), "write hello to notes.txt")
    [first] = wait_for_pending(conversation_id, 1)
    alices = new_page(width=1280, height=900)
    log_in(alices, alice)
    open_conversation(alices, conversation_id)
    bobs = new_page(width=1280, height=900)
    log_in(bobs, bob)
    open_conversation(bobs, conversation_id)
    decide(api_for(alice), first)  # the next turn asks again: its card comes by push to both pages

    api_for(alice).post(f"conversations/{conversation_id}/messages", {"content": "delete notes.txt"})
    [pushed] = wait_for_pending(conversation_id, 1)

    expect(alices.locator(f"#claim-{pushed.pk}")).to_be_attached()
    expect(bobs.locator(f"#claim-{pushed.pk} .claim-form.for-others")).to_have_count(1)  # it came by push
    expect(claim_button(alices, pushed, "Claim")).to_be_hidden()
    expect(claim_button(bobs, pushed, "Claim")).to_be_visible()
