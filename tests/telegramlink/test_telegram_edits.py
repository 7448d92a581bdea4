"""Telegram copies and the version they showed: a press or a typed confirmation decides only what its
copy showed, an edit rewrites each sent copy in place with buttons for the new version (the editor's
own without), and a rewrite that was lost is done by the sweep."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from approvals.permissions import approvers_group
from deliveries import outbox
from deliveries import tasks as delivery_tasks
from telegramlink.channel import CHANNEL
from telegramlink.models import ApprovalMessage, TelegramAccount
from tests.conftest import only_pending, start_conversation
from tests.telegramlink.phone import (
    BOB_TG,
    CAROL_TG,
    edits_to,
    link,
    press,
    queued_unsent,
    replies,
    request_to,
    say,
    send,
    through_the_loop,
)

pytestmark = pytest.mark.django_db


def four_eyes_to_carol(settings, alice, carol, ops_agent) -> tuple[Approval, ApprovalMessage]:
    """alice's four-eyes call, its message to carol (the one approver linked) queued, not yet sent."""
    link(carol, CAROL_TG)
    return queued_unsent(settings, alice, ops_agent, "delete a.txt")


def copies_to(fake, telegram_id: int, approval: Approval) -> list[dict]:
    return [m for m in fake.sent("sendMessage", chat_id=telegram_id) if f"(#{approval.pk})" in m["text"]]


@through_the_loop
def test_a_press_on_a_copy_sent_before_an_edit_decides_only_what_that_copy_showed(fake, settings, alice, bob, carol, ops_agent):
    """Telegram delivered the first send, but its answer was lost (a timeout); bob then edits the
    call, and the retry sends the edit. Each copy decides what it showed, not what the other shows."""
    approval, row = four_eyes_to_carol(settings, alice, carol, ops_agent)
    fake.lost_answers = {"sendMessage"}
    assert send(row) == outbox.Sent.FAILED
    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="chat", shown_hash=approval.shown_hash)
    fake.lost_answers = set()
    assert send(row) == outbox.Sent.SENT
    old, new = copies_to(fake, CAROL_TG, approval)
    assert "a.txt" in old["text"] and "b.txt" in new["text"] and "a.txt" not in new["text"]

    for label in ("Approve", "Reject"):
        assert press(fake, CAROL_TG, fake.buttons(old)[label], query_id=label).startswith("The call was edited after this message")
    assert "Why reject" not in replies(fake, CAROL_TG)[-1]
    assert press(fake, CAROL_TG, fake.buttons(old)["Reject"], query_id="q2").startswith("The call was edited")
    assert TelegramAccount.objects.get(user=carol).awaiting == ""
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert press(fake, CAROL_TG, fake.buttons(new)["Approve"], query_id="q3") == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approved_arguments) == ("approved", carol, {"path": "b.txt"})


@through_the_loop
def test_a_typed_confirmation_decides_the_version_of_the_message_whose_button_asked_for_it(fake, settings, alice, bob, carol, ops_agent):
    approval, row = four_eyes_to_carol(settings, alice, carol, ops_agent)
    fake.lost_answers = {"sendMessage"}
    send(row)
    critical = "b\u200b.txt"  # an invisible character: one level riskier, critical
    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": critical}, via="chat", shown_hash=approval.shown_hash)
    fake.lost_answers = set()
    send(row)
    old, new = copies_to(fake, CAROL_TG, approval)
    assert Approval.objects.get(pk=approval.pk).confirmation_required

    assert press(fake, CAROL_TG, fake.buttons(old)["Approve"]).startswith("The call was edited after this message")
    say(CAROL_TG, critical)
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert press(fake, CAROL_TG, fake.buttons(new)["Approve (type the confirmation)"], query_id="q2") == "Type the confirmation to approve."
    assert TelegramAccount.objects.get(user=carol).awaiting_shown_hash == Approval.objects.get(pk=approval.pk).shown_hash
    edited, dave = Approval.objects.get(pk=approval.pk), User.objects.create_user("dave")
    dave.groups.add(approvers_group())  # a third approver edits it again, on the site
    approval_services.approve_edited(approval.pk, user=dave, arguments={"path": "c\u200b.txt"}, via="chat", shown_hash=edited.shown_hash)
    say(CAROL_TG, critical)  # typed for the version its message showed: it changed meanwhile
    assert replies(fake, CAROL_TG)[-1].startswith("The call was edited after this message")
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def edited_by_bob(fake, alice, bob, carol, ops_agent) -> tuple[Approval, Approval, dict, ApprovalMessage]:
    """alice's four-eyes call sent to bob and carol, then edited by bob (it waits for carol): the
    call before and after the edit, the buttons carol's message had before, and that message."""
    link(bob, BOB_TG)
    link(carol, CAROL_TG)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    before = fake.buttons(request_to(fake, CAROL_TG, approval))
    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="chat", shown_hash=approval.shown_hash)
    edited = Approval.objects.get(pk=approval.pk)
    assert edited.status == "pending" and edited.shown_hash != approval.shown_hash
    return approval, edited, before, ApprovalMessage.objects.get(approval=approval, account__user=carol)


@through_the_loop
def test_an_edit_rewrites_each_sent_copy_in_place_with_buttons_for_the_new_version(fake, alice, bob, carol, ops_agent):
    """Telegram rewrites a copy where it is: once bob edits the call, carol's message shows the edit
    and its buttons carry a version of their own; the old ones (pressed before the edit reached her
    phone) decide nothing."""
    approval, edited, before, row = edited_by_bob(fake, alice, bob, carol, ops_agent)

    (edit,) = edits_to(fake, CAROL_TG)
    assert edit["message_id"] == row.message_id and "b.txt" in edit["text"]
    assert len(copies_to(fake, CAROL_TG, approval)) == 1  # rewritten, not sent again
    after = fake.buttons(edit)
    assert set(after) == {"Approve", "Reject"} and after["Approve"] != before["Approve"]
    row.refresh_from_db()
    assert (row.status, row.shown_hash, row.complete) == ("sent", edited.shown_hash, True)
    assert list(row.versions.order_by("pk").values_list("shown_hash", flat=True)) == [approval.shown_hash, edited.shown_hash]
    assert after["Approve"].split(":", 1)[1] == row.versions.order_by("pk").last().token

    assert press(fake, CAROL_TG, before["Approve"]).startswith("The call was edited after this message")
    assert press(fake, CAROL_TG, before["Reject"], query_id="q2").startswith("The call was edited after this message")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert TelegramAccount.objects.get(user=carol).awaiting == ""

    assert press(fake, CAROL_TG, after["Approve"], query_id="q3") == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approved_arguments) == ("approved", carol, {"path": "b.txt"})
    assert "Approved by carol via telegram" in edits_to(fake, CAROL_TG)[-1]["text"]
    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"


@through_the_loop
def test_an_edit_leaves_the_editors_own_copy_without_buttons_as_slack_does(fake, alice, bob, carol, ops_agent):
    """bob edited the four-eyes call: he may no longer decide it, so his copy shows the edit and says
    others decide it now, with no button to press (a press would be refused anyway)."""
    approval, edited, before, row = edited_by_bob(fake, alice, bob, carol, ops_agent)

    (edit,) = edits_to(fake, BOB_TG)
    assert "b.txt" in edit["text"] and "now decided by others" in edit["text"]
    assert fake.buttons(edit) == {}


@through_the_loop
def test_an_edit_whose_rewrite_was_lost_is_rewritten_by_the_sweep(fake, alice, bob, carol, ops_agent, settings):
    fake.failing = {"editMessageText"}  # the rewrite and every retry fail: as if its task were lost
    approval, edited, before, row = edited_by_bob(fake, alice, bob, carol, ops_agent)
    assert not edits_to(fake, CAROL_TG)
    assert ApprovalMessage.objects.get(pk=row.pk).shown_hash == approval.shown_hash
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    fake.failing = set()

    delivery_tasks.sweep.delay()

    edit = edits_to(fake, CAROL_TG)[-1]
    assert edit["message_id"] == row.message_id and "b.txt" in edit["text"]
    assert fake.buttons(edit)["Approve"] != before["Approve"]
    assert ApprovalMessage.objects.get(pk=row.pk).shown_hash == edited.shown_hash
    assert outbox.lost(CHANNEL, now=timezone.now() + timedelta(seconds=5)).to_rewrite == []
    assert press(fake, CAROL_TG, fake.buttons(edit)["Approve"]) == "Approved."
    assert Approval.objects.get(pk=approval.pk).approved_arguments == {"path": "b.txt"}
