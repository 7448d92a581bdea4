"""Warned before it expires: a due warning replies once under each Slack copy with an Extend button,
Extend pushes the deadline back (refused for someone else or once expired), an expired message says
so, and warnings lost with their task or signal are sent by the sweep once."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from deliveries import outbox
from deliveries.tasks import send_later
from slacklink import blocks
from slacklink.channel import CHANNEL
from slacklink.models import Reminder, SlackMessage
from tests.slacklink.workspace import ALICE, MALLORY, link, queued_unsent, request_to, sweep, through_the_loop

pytestmark = pytest.mark.django_db


def expiring(approval: Approval) -> None:
    """What the expiry sweep does when the warning is due: the signal, after its commit."""
    from approvals.signals import approvals_expiring

    approvals_expiring.send(sender=Approval, approvals=[Approval.objects.get(pk=approval.pk)])


@through_the_loop
def test_a_due_warning_replies_once_under_each_copy_with_when_it_expires_and_an_extend_button(pending, fake, alice):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=3, seconds=30))

    expiring(approval)
    expiring(approval)  # a second signal for the same deadline
    sweep()

    (warning,) = fake.replies_to(ALICE)
    deadline = Approval.objects.get(pk=approval.pk).expires_at
    assert warning["thread_ts"] == message["ts"]
    assert fake.text_of(warning).startswith(f"Expires at {deadline:%H:%M} UTC (in 4 min)")
    assert list(fake.buttons(warning)) == ["Extend", "Open on the site"]
    assert Reminder.objects.get().kind == "expiring"


@through_the_loop
def test_extend_on_the_warning_pushes_the_deadline_back_as_the_presser_and_every_copy_shows_it(pending, fake, alice):
    approval, message = pending
    before = timezone.now() + timedelta(minutes=2)
    Approval.objects.filter(pk=approval.pk).update(expires_at=before)
    expiring(approval)
    (warning,) = fake.replies_to(ALICE)

    assert fake.press(ALICE, warning, "Extend")[0] == 200

    approval.refresh_from_db()
    assert approval.expires_at > before and approval.extended_by == alice
    assert fake.ephemerals(ALICE)[-1] == f"Extended: #{approval.pk} now expires at {approval.expires_at:%H:%M} UTC."
    now = request_to(fake, ALICE, approval)
    assert now["ts"] == message["ts"]
    assert f"Expires at {approval.expires_at:%Y-%m-%d %H:%M} UTC, extended by alice" in fake.text_of(now)
    assert SlackMessage.objects.get(approval=approval).ts == message["ts"]  # the reply's ts never replaced the request's

    fake.press(ALICE, warning, "Extend")
    assert "already extended once" in fake.ephemerals(ALICE)[-1]
    expiring(approval)  # the new deadline's warning: no second extend offered
    assert list(fake.buttons(fake.replies_to(ALICE)[-1])) == ["Open on the site"] and len(fake.replies_to(ALICE)) == 2


@through_the_loop
def test_extend_is_refused_for_someone_else_and_for_an_expired_approval(pending, fake, alice, mallory):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=2))
    expiring(approval)
    (warning,) = fake.replies_to(ALICE)
    link(fake, mallory, MALLORY)
    fake.press(MALLORY, warning, "Extend")
    assert fake.ephemerals(MALLORY)[-1] == "This request is no longer known."

    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    fake.press(ALICE, warning, "Extend")

    assert fake.ephemerals(ALICE)[-1].startswith("too late: expired")
    assert Approval.objects.get(pk=approval.pk).extended_at is None


@through_the_loop
def test_an_expired_message_says_so_and_links_to_its_card_to_ask_again(pending, fake, alice):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert approval_services.expire_overdue() == [approval.pk]

    now = request_to(fake, ALICE, approval)
    assert "Expired" in fake.text_of(now) and list(fake.buttons(now)) == ["Open in hitl to ask again"]
    assert fake.buttons(now)["Open in hitl to ask again"]["url"] == blocks.conversation_url(approval)


@through_the_loop
def test_a_warning_lost_with_its_task_is_sent_by_the_sweep_once_and_never_after_the_decision(pending, fake, alice):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=2))
    ((_, lost),) = CHANNEL.queue_warnings(Approval.objects.get(pk=approval.pk))  # queued, its task lost

    sweep()
    sweep()

    assert Reminder.objects.get(pk=lost).status == "sent" and len(fake.replies_to(ALICE)) == 1
    Reminder.objects.filter(pk=lost).update(status="queued")
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    assert outbox.send(CHANNEL, Reminder, lost) == outbox.Sent.CLOSED and len(fake.replies_to(ALICE)) == 1


@through_the_loop
def test_a_copy_sent_after_its_approval_was_warned_gets_the_warning_too(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(seconds=50), warned_at=timezone.now())
    expiring(approval)  # the warning went out while the copy was still queued: nothing to reply under yet
    assert not fake.replies_to(ALICE)

    send_later(CHANNEL, [row.pk])

    (warning,) = fake.replies_to(ALICE)
    assert warning["thread_ts"] == request_to(fake, ALICE, approval)["ts"] and "Extend" in fake.buttons(warning)


@through_the_loop
def test_a_warning_whose_signal_was_lost_is_queued_and_sent_by_the_sweep_once(pending, fake, alice, settings):
    approval, message = pending
    # Warned by a worker that died before its signal (or had no Slack set up): no warning row.
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=2), warned_at=timezone.now())
    sweep()  # warned just now: the signal still has its chance
    assert not Reminder.objects.exists() and not fake.replies_to(ALICE)

    settings.HITL_SLACK_STALE_SECONDS = 0
    sweep()
    sweep()

    (warning,) = fake.replies_to(ALICE)
    assert warning["thread_ts"] == message["ts"] and "Extend" in fake.buttons(warning)
