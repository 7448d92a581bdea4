"""The AI reviewer in Chromium on the real stack (issue 40, item 1): the scripted reviewer approves
a plain write, which runs; a write to ../x is escalated with its rationale on the card and a person
approves it; a four-eyes call is never seen by the reviewer; a reviewer model that hangs (the
stand-in OpenAI server, called through litellm) is escalated after HITL_REVIEWER_SECONDS, the card
saying so. With HITL_SHOTS=<dir>, the card's states are also saved there at 1280 and 390 px."""
import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from chat.models import Conversation, ToolCall
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    card,
    log_in,
    new_page,
    open_conversation,
    page,
    say,
    shoot,
    start,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def reviewed(agent):
    agent.reviewer_model = "scripted/reviewer"
    agent.reviewer_max_risk = "medium"
    agent.save()
    return agent


def test_the_reviewer_approves_a_plain_write_and_a_person_approves_what_it_escalated(page, alice, reviewed, api_for, e2e):
    api = api_for(alice)
    conversation_id = start(api, "write hello to notes.txt")
    wait_for_status(conversation_id, Conversation.Status.IDLE)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    expect(card(page, "write_file").locator(".by-reviewer")).to_contain_text(
        "Approved by the AI reviewer (scripted/reviewer)"
    )
    assert ToolCall.objects.get(message__conversation_id=conversation_id).status == ToolCall.Status.SUCCEEDED
    shoot(page, "reviewer-approved")

    say(api, conversation_id, "write hello to ../x")
    [escalated] = wait_for_pending(conversation_id, 1)
    shown = card(page, "write_file", "../x")
    expect(shown.locator(".reviewer-note.escalated")).to_have_text(
        "The reviewer asked you because: the path leaves the project folder (it contains '..')"
    )
    shoot(page, "reviewer-escalated")
    button(shown, "Approve").click()
    expect(shown.locator(".decided-approved")).to_contain_text("Approved by alice via chat")
    escalated.refresh_from_db()
    assert (escalated.decided_by, escalated.review_state) == (alice, "escalated")


def test_a_four_eyes_call_is_never_seen_by_the_reviewer(page, alice, reviewed, api_for, e2e):
    reviewed.owner_max_risk = "low"
    reviewed.save()
    conversation_id = start(api_for(alice), "write hello to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    shown = card(page, "write_file")
    expect(shown.locator(".four-eyes")).to_be_visible()
    expect(shown.locator(".reviewer-note")).to_have_count(0)
    assert (approval.review_state, approval.reviewer_model) == ("", "")


def test_a_reviewer_that_hangs_hands_the_call_to_a_person(page, alice, reviewed, api_for, e2e, fake_model):
    reviewed.reviewer_model = "openai/gpt-4o-mini"
    reviewed.reviewer_api_base = fake_model.base_url
    reviewed.save()
    fake_model.respond_with_hang(60)
    log_in(page, alice)
    conversation_id = start(api_for(alice), "write hello to notes.txt")
    open_conversation(page, conversation_id)
    shown = card(page, "write_file")
    reviewing = Approval.objects.filter(conversation_id=conversation_id, review_state="reviewing").exists()
    if reviewing:  # the card as a person sees it while the reviewer thinks (it may already be late on a slow machine)
        expect(shown.locator(".reviewer-note")).to_contain_text("The AI reviewer (openai/gpt-4o-mini) is looking at this call first")
        shoot(page, "reviewer-reviewing")
    expect(shown.locator(".reviewer-note.escalated")).to_contain_text(
        "The reviewer asked you because: the reviewer did not answer", timeout=30_000
    )
    approval = Approval.objects.get(conversation_id=conversation_id)
    assert (approval.status, approval.review_state) == ("pending", "escalated")
    shoot(page, "reviewer-late")
