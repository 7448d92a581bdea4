"""Deciding on Slack through approvals.services via "slack": an approve press, Reject asking why in a
modal, a late press or submission told who decided first, presses that may not decide, a critical
call's confirmation modal, questions answered by buttons, a select or a modal, or declined; the card
and the history show the decision as via slack."""
import json

import pytest

from approvals import services as approval_services
from approvals.models import Approval
from slacklink import blocks
from slacklink.models import SlackMessage
from tests.conftest import client_for, only_pending, start_conversation
from tests.slacklink.workspace import ALICE, BOB, MALLORY, STRANGER, link, request_to, through_the_loop
from tests.standins.fake_slack import dm

pytestmark = pytest.mark.django_db


@through_the_loop
def test_an_approve_press_decides_as_the_linked_user_via_slack_and_updates_the_message(pending, fake, alice):
    approval, message = pending

    assert fake.press(ALICE, message, "Approve")[0] == 200

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "slack")
    row = SlackMessage.objects.get(approval=approval)
    assert row.status == "closed"
    now = request_to(fake, ALICE, approval)
    assert (now["ts"], now["channel"]) == (row.ts, row.channel) == (message["ts"], dm(ALICE))
    assert f"Approved by alice via slack at {approval.decided_at:%H:%M}" in fake.text_of(now)
    assert fake.buttons(now) == {}


@through_the_loop
def test_reject_always_opens_a_modal_asking_why_whose_reason_rejects(pending, fake, alice):
    approval, message = pending

    fake.press(ALICE, message, "Reject")

    (view,) = fake.views()
    assert view["callback_id"] == blocks.REASON_VIEW and Approval.objects.get(pk=approval.pk).status == "pending"
    assert "Why reject it?" in json.dumps(view) and "Write a.txt" in json.dumps(view)
    assert fake.submit(ALICE, view, {"reason": "  Legal has <not> signed off "}) == (200, "")
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "Legal has <not> signed off", "slack")
    assert "Rejected by alice via slack" in fake.text_of(request_to(fake, ALICE, approval))
    assert "Legal has <not> signed off" in fake.text_of(request_to(fake, ALICE, approval))


@through_the_loop
def test_a_late_press_is_told_who_decided_first_in_an_ephemeral(pending, fake, alice):
    approval, message = pending
    approval_services.decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")
    assert "Rejected by alice via api" in fake.text_of(request_to(fake, ALICE, approval))

    fake.press(ALICE, message, "Approve")

    assert fake.ephemerals(ALICE)[-1].startswith("too late: rejected by alice via api at ")
    assert fake.ephemerals(ALICE)[-1].endswith(": not now")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


@through_the_loop
def test_a_late_modal_submission_shows_who_decided_first_in_the_modal(pending, fake, alice):
    approval, message = pending
    fake.press(ALICE, message, "Reject")
    approval_services.decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)

    status, body = fake.submit(ALICE, fake.views()[-1], {"reason": "no"})

    assert status == 200 and json.loads(body)["errors"]["reason"].startswith("too late: approved by alice via api")
    assert Approval.objects.get(pk=approval.pk).status == "approved"


@through_the_loop
def test_presses_from_someone_unlinked_or_not_allowed_or_on_anothers_copy_decide_nothing(pending, fake, alice, mallory):
    approval, message = pending
    fake.press(STRANGER, message, "Approve")
    assert "not linked" in fake.ephemerals(STRANGER)[-1]
    link(fake, mallory, MALLORY)
    fake.press(MALLORY, message, "Approve")  # alice's button, pressed by mallory
    assert fake.ephemerals(MALLORY)[-1] == "This request is no longer known."
    fake.press(ALICE, message, "Approve", team="T0OTHER")  # the same user id in another workspace
    assert "not linked" in fake.ephemerals(ALICE)[-1]
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_critical_call_opens_a_modal_for_its_confirmation(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    message = request_to(fake, ALICE, approval)
    assert "Critical: approving it needs the confirmation DELETE" in fake.text_of(message)

    fake.press(ALICE, message, "Approve (type the confirmation)")

    assert Approval.objects.get(pk=approval.pk).status == "pending"  # one press approves nothing
    (view,) = fake.views()
    assert view["callback_id"] == blocks.CONFIRM_VIEW and "DELETE" in json.dumps(view)
    status, body = fake.submit(ALICE, view, {"confirmation": "delete"})
    assert status == 200 and json.loads(body)["errors"]["confirmation"].startswith("That is not it")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert fake.submit(ALICE, view, {"confirmation": "DELETE"}) == (200, "")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "slack")


@through_the_loop
def test_question_options_are_buttons_and_a_press_answers(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "ask me to choose between tea, coffee and water"))
    message = request_to(fake, ALICE, approval)
    assert list(fake.buttons(message))[:3] == ["tea", "coffee", "water"]
    assert "Reject (decline to answer)" in fake.buttons(message)

    fake.press(ALICE, message, "coffee")

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_via) == ("answered", "coffee", "slack")
    assert "Answered by alice via slack" in fake.text_of(request_to(fake, ALICE, approval))


@through_the_loop
def test_a_confirmation_with_its_own_words_shows_them_on_its_buttons(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "ask me to confirm deleting the drafts with Delete or Go back"))
    message = request_to(fake, ALICE, approval)
    assert list(fake.buttons(message))[:2] == ["Delete", "Go back"]

    fake.press(ALICE, message, "Go back")

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_via) == ("answered", False, "slack")


@through_the_loop
def test_many_options_become_a_select(fake, alice, agent):
    link(fake, alice, ALICE)
    options = ["red", "orange", "yellow", "green", "blue", "indigo", "violet"]
    ask = json.dumps({"question": "Which colour?", "type": "choice", "options": options})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {ask}"))
    message = request_to(fake, ALICE, approval)
    assert len(fake.select(message)["options"]) == 7

    fake.choose(ALICE, message, "6.")

    assert Approval.objects.get(pk=approval.pk).answer == "indigo"


@through_the_loop
def test_a_text_question_is_answered_in_a_modal(fake, alice, agent):
    link(fake, alice, ALICE)
    ask = json.dumps({"question": "How many?", "type": "number", "min": 1, "max": 5})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {ask}"))
    fake.press(ALICE, request_to(fake, ALICE, approval), "Answer…")
    view = fake.views()[-1]

    status, body = fake.submit(ALICE, view, {"answer": "9"})
    assert status == 200 and "between 1 and 5" in json.loads(body)["errors"]["answer"]
    assert fake.submit(ALICE, view, {"answer": "3"}) == (200, "")
    assert Approval.objects.get(pk=approval.pk).answer == 3


@through_the_loop
def test_the_card_and_the_history_show_a_decision_made_in_slack_as_via_slack(fake, alice, bob, carol, ops_agent):
    link(fake, bob, BOB)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    fake.press(BOB, request_to(fake, BOB, approval), "Reject")
    assert fake.submit(BOB, fake.views()[-1], {}) == (200, "")  # the reason left empty
    assert Approval.objects.get(pk=approval.pk).decided_via == "slack"
    card = client_for(alice).get(f"/conversations/{approval.conversation_id}/").content.decode()
    assert "by bob via slack" in card
    history = client_for(bob).get("/approvals/history/")
    assert history.status_code == 200 and '<td data-label="Via">slack</td>' in history.content.decode()


@through_the_loop
def test_a_declined_question_asks_why_and_the_reason_is_kept(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "ask me to choose between tea, coffee and water"))
    fake.press(ALICE, request_to(fake, ALICE, approval), "Reject (decline to answer)")
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert fake.submit(ALICE, fake.views()[-1], {"reason": "ask someone else"}) == (200, "")

    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("declined", "ask someone else", "slack")
