"""The life of a Telegram message (the deliveries outbox): closed unsent when decided before it was
sent, kept queued when a send fails and sent again by the sweep until the retries run out, recorded
when pressed before its send was, failed when the bot is blocked, and a failed edit closed again."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from deliveries import outbox
from deliveries import tasks as delivery_tasks
from telegramlink import updates
from telegramlink.channel import CHANNEL
from telegramlink.models import ApprovalMessage
from tests.conftest import only_pending, start_conversation
from tests.telegramlink.phone import (
    ALICE_TG,
    BOB_TG,
    edits_to,
    link,
    press_update,
    queued_unsent,
    request_to,
    send,
    through_the_loop,
)

pytestmark = pytest.mark.django_db


def lost(*, now=None) -> tuple[list, list]:
    """(rows to send again, messages to close again) that a sweep a second from now finds."""
    found = outbox.lost(CHANNEL, now=now or timezone.now() + timedelta(seconds=1))
    return found.to_send, found.to_close


@through_the_loop
def test_a_message_whose_approval_was_decided_before_sending_is_closed_unsent(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")

    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)  # its closing task closes it unsent

    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"
    assert send(row) == outbox.Sent.NOT_CLAIMED
    ApprovalMessage.objects.filter(pk=row.pk).update(status="queued")  # as if the send came before the closing
    assert send(row) == outbox.Sent.CLOSED
    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"
    assert not request_to(fake, ALICE_TG, approval) and not edits_to(fake, ALICE_TG)


@through_the_loop
def test_a_failed_send_stays_queued_and_the_sweep_sends_it_again(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"sendMessage"}

    assert send(row) == outbox.Sent.FAILED
    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.attempts, row.message_id) == ("queued", 2, None)
    assert "Internal Server Error" in row.last_error
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([(ApprovalMessage, row.pk)], [])

    fake.failing = set()
    assert send(row) == outbox.Sent.SENT

    row.refresh_from_db()
    assert (row.status, row.attempts, row.last_error) == ("sent", 3, "")
    assert row.message_id > 100 and request_to(fake, ALICE_TG, approval)
    assert lost() == ([], [])


@through_the_loop
def test_a_press_on_a_copy_whose_send_was_never_recorded_records_it_and_edits_it_to_the_outcome(fake, alice, agent, settings):
    """Telegram delivered the request but its answer never came back (or the worker died before
    recording it): the press carries the message, so the outcome still replaces its buttons."""
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.lost_answers = {"sendMessage"}
    assert send(row) == outbox.Sent.FAILED
    fake.lost_answers = set()
    assert ApprovalMessage.objects.get(pk=row.pk).message_id is None
    (delivered,) = [m for m in fake.delivered.values() if f"(#{approval.pk})" in m["text"]]
    someone_elses = dict(delivered, chat={"id": BOB_TG, "type": "private"})

    updates.handle(press_update(ALICE_TG, fake.buttons(delivered)["Approve"], query_id="q9", message=someone_elses))
    assert fake.answer_to("q9") == "Approved."
    assert ApprovalMessage.objects.get(pk=row.pk).message_id is None  # a message of another chat proves nothing
    assert not edits_to(fake, ALICE_TG)

    # The same, with the message the button was really on.
    approval2, row2 = queued_unsent(settings, alice, agent, "write bye to b.txt")
    fake.lost_answers = {"sendMessage"}
    send(row2)
    fake.lost_answers = set()
    (delivered2,) = [m for m in fake.delivered.values() if f"(#{approval2.pk})" in m["text"]]

    updates.handle(press_update(ALICE_TG, fake.buttons(delivered2)["Approve"], query_id="q10", message=delivered2))

    assert fake.answer_to("q10") == "Approved."
    row2.refresh_from_db()
    assert (row2.status, row2.message_id) == ("closed", delivered2["message_id"])
    (edit,) = edits_to(fake, ALICE_TG)
    assert edit["message_id"] == delivered2["message_id"] and "Approved by alice via telegram" in edit["text"]


@through_the_loop
def test_a_send_that_keeps_failing_gives_up_after_the_retries(fake, alice, agent, settings):
    settings.HITL_TELEGRAM_RETRIES = 1
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"sendMessage"}

    assert send(row) == outbox.Sent.FAILED
    assert ApprovalMessage.objects.get(pk=row.pk).status == "queued"
    assert send(row) == outbox.Sent.FAILED
    assert send(row) == outbox.Sent.NOT_CLAIMED

    row.refresh_from_db()
    assert (row.status, row.attempts) == ("failed", 2)
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([], [])


@through_the_loop
def test_the_sweep_sends_what_a_lost_task_left_queued(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    settings.HITL_TELEGRAM_STALE_SECONDS = 0

    delivery_tasks.sweep.delay()

    assert ApprovalMessage.objects.get(pk=row.pk).status == "sent"
    assert request_to(fake, ALICE_TG, approval)


@through_the_loop
def test_a_blocked_bot_marks_the_message_failed(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.forbidden = {"sendMessage"}

    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.attempts) == ("failed", 1)
    assert "blocked" in row.last_error
    assert send(row) == outbox.Sent.NOT_CLAIMED
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([], [])
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    assert not edits_to(fake, ALICE_TG)

    # Blocked when the request is made: its task fails the message, and the call still waits.
    later = only_pending(start_conversation(alice, agent, "write hello to b.txt"))
    assert ApprovalMessage.objects.get(approval=later).status == "failed"


@through_the_loop
def test_a_failed_edit_is_kept_for_the_sweep_to_close_again(pending, fake, alice, settings):
    approval, _ = pending
    row = ApprovalMessage.objects.get(approval=approval)
    fake.failing = {"editMessageText"}

    assert outbox.close(CHANNEL, row.pk) is True  # still pending: nothing to edit
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)  # its closing task fails, retried eagerly

    row.refresh_from_db()
    assert row.status == "sent" and "Internal Server Error" in row.last_error
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([], [row.pk])

    fake.failing = set()
    assert outbox.close(CHANNEL, row.pk) is True
    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"
    assert "Approved by alice via chat" in edits_to(fake, ALICE_TG)[-1]["text"]
