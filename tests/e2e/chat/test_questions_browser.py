"""Questions and plans in Chromium: the card's controls for each type, clicked for real, against the
real stack (daphne, a Celery worker, Redis, the scripted model)."""
import pytest
from playwright.sync_api import Page, expect

from approvals.models import Approval
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    browser,
    button,
    card,
    last_reply,
    log_in,
    new_page,
    open_conversation,
    page,
    start,
    status_bar,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e


def asked(page: Page, api, alice, text: str) -> tuple[str, Approval]:
    conversation_id = start(api, text)
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    return conversation_id, approval


def test_a_choice_is_answered_on_its_card(page, alice, agent, api_for):
    _, approval = asked(page, api_for(alice), alice, "ask me to choose between tea, coffee and water")
    question = card(page, "ask_human")
    expect(question).to_contain_text("Which one?")
    expect(question).to_contain_text("Waiting for your answer")
    question.get_by_label("coffee").check()
    button(question, "Answer").click()

    expect(question).to_have_attribute("data-status", "succeeded")
    expect(question.locator(".decided")).to_contain_text("Answered by alice via chat")
    expect(question.locator(".decided q")).to_have_text("coffee")
    expect(last_reply(page)).to_have_text("You answered: coffee.")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")
    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_via) == ("answered", "coffee", "chat")


def test_a_number_out_of_range_is_refused_on_the_page_and_one_in_range_answers(page, alice, agent, api_for):
    _, approval = asked(page, api_for(alice), alice, "ask me for a number between 1 and 10")
    question = card(page, "ask_human")
    field = question.get_by_label("A number from 1 to 10")
    field.fill("11")
    button(question, "Answer").click()
    expect(question.locator("input[type=number]:invalid")).to_have_count(1)  # the browser refuses to send it
    assert field.evaluate("input => input.validationMessage")
    approval.refresh_from_db()
    assert approval.status == "pending"

    field.fill("7")
    button(question, "Answer").click()
    expect(question).to_have_attribute("data-status", "succeeded")
    expect(last_reply(page)).to_have_text("You answered: 7.")
    approval.refresh_from_db()
    assert approval.answer == 7


def test_a_date_is_answered_with_the_date_picker(page, alice, agent, api_for):
    _, approval = asked(page, api_for(alice), alice, "ask me for a date")
    question = card(page, "ask_human")
    question.get_by_label("A date").fill("2026-12-01")
    button(question, "Answer").click()
    expect(question).to_have_attribute("data-status", "succeeded")
    expect(last_reply(page)).to_have_text("You answered: 2026-12-01.")
    approval.refresh_from_db()
    assert approval.answer == "2026-12-01"


def test_a_plan_is_approved_without_its_optional_step(page, alice, agent, api_for):
    _, approval = asked(page, api_for(alice), alice, "plan a tidy-up")
    plan = card(page, "propose_plan")
    expect(plan).to_contain_text("Plan: a tidy-up")
    expect(plan.get_by_role("checkbox", name="Gather what a tidy-up needs")).to_be_disabled()  # required
    plan.get_by_role("checkbox", name="Tell bob@example.com").uncheck()
    button(plan, "Approve plan").click()

    expect(plan).to_have_attribute("data-status", "succeeded")
    expect(plan.locator(".decided")).to_contain_text("Approved (steps 1, 3) by alice via chat")
    expect(last_reply(page)).to_have_text("Approved steps: 1, 3.")
    approval.refresh_from_db()
    assert approval.answer == {"approved_steps": [1, 3], "dropped_steps": [2]}


def test_a_plan_changed_on_its_card_holds_the_call_of_a_dropped_step(page, alice, agent, api_for):
    """Issue 39, item 7: a step reworded and moved up, another dropped, in Chromium; the model then
    calls the dropped step's tool anyway, and that call waits, its card naming the plan."""
    _, approval = asked(page, api_for(alice), alice, "carry out a plan to tidy the notes and every step of it")
    plan = card(page, "propose_plan")
    expect(plan).to_contain_text("Calls send_email · about 2 min")
    plan.get_by_role("checkbox", name="Tell bob@example.com").uncheck()
    last = plan.locator(".plan-step").nth(2)
    last.get_by_text("Change this step").click()
    last.get_by_label("What it does").fill("Write the tidy plan down")
    last.get_by_role("button", name="Move up").click()
    expect(plan.locator(".plan-step").nth(1)).to_have_attribute("data-step", "3")  # moved above "Tell bob"
    expect(plan.locator(".plan-step").nth(1).locator(".step-action")).to_have_text("Write the tidy plan down")  # as typed
    button(plan, "Approve plan").click()

    expect(plan).to_have_attribute("data-status", "succeeded")
    expect(plan.locator(".decided")).to_contain_text("Approved as changed (steps 1, 3) by alice via chat")
    expect(plan.locator(".decided-steps")).to_contain_text("Write the tidy plan down")
    held = card(page, "send_email")
    expect(held).to_contain_text("Pending approval")
    expect(held.locator(".card-banner .plan-hold")).to_contain_text("Outside the approved plan “tidy the notes”")  # said first, not folded
    approval.refresh_from_db()
    assert approval.answer["approved_steps"] == [1, 3] and approval.answer["steps"][1]["action"] == "Write the tidy plan down"


def test_a_file_is_uploaded_on_its_card_and_a_wrong_one_refused(page, alice, agent, api_for, stack):
    """Issue 39, item 6: the card's file input, in Chromium; a type the question does not take is
    refused with the reason (the question stays open), then the right one is stored in the sandbox."""
    conversation_id, approval = asked(page, api_for(alice), alice, "ask me for a csv file of at most 100 bytes")
    question = card(page, "ask_human")
    field = question.get_by_label("A file (.csv), at most 100")
    expect(field).to_have_attribute("accept", ".csv")
    field.set_input_files({"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hello"})  # accept is a hint: sent anyway
    button(question, "Answer").click()
    expect(question.locator(".error")).to_have_text("notes.txt is not a type this question takes: .csv.")
    approval.refresh_from_db()
    assert approval.status == "pending"

    question.get_by_label("A file (.csv), at most 100").set_input_files({"name": "totals.csv", "mimeType": "text/csv", "buffer": b"a,b\n1,2\n"})
    button(question, "Answer").click()

    expect(question).to_have_attribute("data-status", "succeeded")
    expect(question.locator(".decided q")).to_have_text("totals.csv (8 bytes), stored as uploads/totals.csv")
    expect(last_reply(page)).to_contain_text("totals.csv (8 bytes)")
    assert (stack.sandbox_root / conversation_id / "uploads" / "totals.csv").read_bytes() == b"a,b\n1,2\n"


def test_a_question_is_declined_with_a_reason(page, alice, agent, api_for):
    _, approval = asked(page, api_for(alice), alice, "ask me my password")
    question = card(page, "ask_human")
    button(question, "Decline to answer").click()
    question.get_by_label("Why not (optional)").fill("never")
    button(question, "Confirm decline").click()
    expect(question).to_have_attribute("data-status", "rejected")
    expect(question.locator(".decided")).to_contain_text("Declined by alice via chat")
    expect(question.locator(".decided")).to_contain_text("“never”")
    expect(last_reply(page)).to_have_text("You declined to answer (never).")
