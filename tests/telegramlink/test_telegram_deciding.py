"""Deciding on Telegram with a press or a typed reply: approve as the linked user, a late press told
who decided first, a reason typed after Reject, a critical call's typed confirmation, and questions
answered by a button or a typed answer, or declined."""
import json

import pytest

from approvals import services as approval_services
from approvals.models import Approval
from telegramlink import texts
from telegramlink.models import ApprovalMessage, TelegramAccount
from tests.conftest import only_pending, start_conversation
from tests.telegramlink.phone import ALICE_TG, edits_to, link, press, replies, request_to, say, through_the_loop, token_of

pytestmark = pytest.mark.django_db


@through_the_loop
def test_an_approve_press_decides_as_the_telegram_user_and_edits_the_message(pending, fake, alice):
    approval, buttons = pending

    assert press(fake, ALICE_TG, buttons["Approve"]) == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "telegram")
    row = ApprovalMessage.objects.get(approval=approval)
    (edit,) = edits_to(fake, ALICE_TG)
    assert edit["message_id"] == row.message_id and row.status == "closed"
    assert edit["text"] == texts.outcome_text(approval)
    assert "✅ Approved by alice via telegram" in edit["text"]
    assert not edit.get("reply_markup")


@through_the_loop
def test_a_press_after_another_decision_says_who_decided_first(pending, fake, alice):
    approval, buttons = pending
    approval_services.decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")
    assert len(edits_to(fake, ALICE_TG)) == 1  # closed when decided

    late = press(fake, ALICE_TG, buttons["Approve"])

    assert late.startswith("Too late: ❌ Rejected by alice via api") and late.endswith(": not now.")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


@through_the_loop
def test_reject_with_reason_takes_the_next_message_as_the_reason(pending, fake, alice):
    approval, buttons = pending

    assert press(fake, ALICE_TG, buttons["Reject"]) == "Reply with the reason."
    assert replies(fake, ALICE_TG)[-1] == f"Why reject #{approval.pk}? Reply with the reason."
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    say(ALICE_TG, "  Legal has <not> signed off ")

    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "Legal has <not> signed off", "telegram")
    assert replies(fake, ALICE_TG)[-1] == f"Rejected #{approval.pk}."
    assert TelegramAccount.objects.get(user=alice).awaiting == ""
    assert "Legal has &lt;not&gt; signed off" in edits_to(fake, ALICE_TG)[-1]["text"]


@through_the_loop
def test_a_critical_call_is_approved_only_with_its_typed_confirmation(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    assert approval.confirmation_required and approval.confirmation_hint == "DELETE"
    request = request_to(fake, ALICE_TG, approval)
    assert "Critical: approving it needs the confirmation <code>DELETE</code>." in request["text"]
    buttons = fake.buttons(request)

    assert press(fake, ALICE_TG, buttons["Approve (type the confirmation)"]) == "Type the confirmation to approve."
    assert Approval.objects.get(pk=approval.pk).status == "pending"  # one tap approves nothing
    say(ALICE_TG, "delete")
    assert replies(fake, ALICE_TG)[-1].startswith("That is not it: type <code>DELETE</code>")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    say(ALICE_TG, "DELETE")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "telegram")


@through_the_loop
def test_a_choice_question_gets_a_button_per_option_and_pressing_one_answers_it_via_telegram(fake, alice, agent):
    link(alice, ALICE_TG)
    conversation = start_conversation(alice, agent, "ask me to choose between tea, coffee and water")
    approval = only_pending(conversation)
    request = request_to(fake, ALICE_TG, approval)
    buttons = fake.buttons(request)
    token = token_of(ApprovalMessage.objects.get(approval=approval))
    assert buttons == {"tea": f"o0:{token}", "coffee": f"o1:{token}", "water": f"o2:{token}",
                       "Reject (decline to answer)": f"r:{token}"}
    assert "Which one?" in request["text"]
    assert press(fake, ALICE_TG, f"o7:{token}", query_id="q0") == "That is not one of the options."
    assert press(fake, ALICE_TG, f"a:{token}", query_id="q00") == "This is a question: answer it, or decline to answer."

    assert press(fake, ALICE_TG, buttons["coffee"]) == "Answered."

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_by, approval.decided_via) == ("answered", "coffee", alice, "telegram")
    assert "✅ Answered by alice via telegram" in edits_to(fake, ALICE_TG)[-1]["text"]
    assert edits_to(fake, ALICE_TG)[-1]["text"].endswith(": coffee")


@through_the_loop
def test_a_confirm_question_has_yes_and_no_and_no_answers_false(fake, alice, agent):
    link(alice, ALICE_TG)
    arguments = json.dumps({"question": "Shall I go on?", "type": "confirm"})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {arguments}"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    assert set(buttons) == {"Yes", "No", "Reject (decline to answer)"}

    assert press(fake, ALICE_TG, buttons["No"]) == "Answered."

    assert Approval.objects.get(pk=approval.pk).answer is False


@through_the_loop
def test_a_confirmation_with_its_own_words_shows_them_on_its_buttons(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me to confirm deleting the drafts with Delete or Go back"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    assert set(buttons) == {"Delete", "Go back", "Reject (decline to answer)"}

    assert press(fake, ALICE_TG, buttons["Delete"]) == "Answered."

    assert Approval.objects.get(pk=approval.pk).answer is True


@through_the_loop
def test_a_typed_answer_after_answer_type_it_answers_a_text_question(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me what to call the file"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    assert set(buttons) == {"Answer (type it)", "Reject (decline to answer)"}

    assert press(fake, ALICE_TG, buttons["Answer (type it)"]) == "Reply with your answer."
    assert replies(fake, ALICE_TG)[-1] == f"Reply with your answer to #{approval.pk}."
    say(ALICE_TG, "notes.txt")

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_by, approval.decided_via) == ("answered", "notes.txt", alice, "telegram")
    assert replies(fake, ALICE_TG)[-1] == f"Answered #{approval.pk}."
    assert TelegramAccount.objects.get(user=alice).awaiting == ""


@through_the_loop
def test_an_invalid_typed_answer_is_asked_again(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me for a number between 1 and 10"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    press(fake, ALICE_TG, buttons["Answer (type it)"])

    say(ALICE_TG, "eleven")
    assert replies(fake, ALICE_TG)[-1].endswith("Reply again.")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    say(ALICE_TG, "7")

    assert Approval.objects.get(pk=approval.pk).answer == 7


@through_the_loop
def test_declining_a_question_with_its_reject_button(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me what to call the file"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))

    assert press(fake, ALICE_TG, buttons["Reject (decline to answer)"]) == "Declined."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("declined", "telegram")
