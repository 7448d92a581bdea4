"""The channel base (deliveries), apart from any wire: a channel whose send does what each test
scripts, over email's table. What every channel inherits: a row is claimed by one send only; a
refusal is retried until the channel's retries are spent, a permanent one fails at once; a row no
longer wanted is closed unsent; a decided approval's copy is never sent; the sweep sends again, once,
what a lost task left; a copy is warned once per deadline; one wiring and one sweep for every channel."""
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.contrib import admin
from django.utils import timezone

from approvals import services as approval_services
from deliveries import channels, outbox
from deliveries import tasks as delivery_tasks
from emaillink.channel import EmailChannel
from emaillink.models import EmailDelivery
from tests.conftest import pending_approvals, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


class Scripted(EmailChannel):
    """Email's readers and table; a send that answers from a script and records what it sent."""

    def __init__(self, *answers):
        self.answers, self.sent_rows = list(answers), []

    def enabled(self) -> bool:
        return True

    def send(self, row):
        answer = self.answers.pop(0) if self.answers else {}
        if isinstance(answer, Exception):
            raise answer
        self.sent_rows.append(row.pk)
        return answer


@pytest.fixture
def approval(alice, agent):
    alice.email = "alice@example.org"
    alice.save()
    (approval,) = pending_approvals(start_conversation(alice, agent, "write hello to a.txt"))
    return approval


def test_a_row_is_sent_once_and_a_send_voided_by_a_requeue_marks_nothing(approval):
    channel = Scripted()
    (pk,) = channel.queue(approval)
    assert outbox.send(channel, EmailDelivery, pk) == outbox.Sent.SENT
    assert outbox.send(channel, EmailDelivery, pk) == outbox.Sent.NOT_CLAIMED  # a retry, or the sweep, after it went
    assert channel.sent_rows == [pk] and EmailDelivery.objects.get(pk=pk).status == "sent"

    # An edit that requeues the row while a send is on the wire voids that send: it marks nothing,
    # and the new version goes out next.
    class EditedMeanwhile(Scripted):
        def send(self, row):
            outbox.requeue(EmailDelivery, EmailDelivery.objects.filter(pk=row.pk))
            return super().send(row)

    outbox.requeue(EmailDelivery, EmailDelivery.objects.filter(pk=pk))
    assert outbox.send(EditedMeanwhile(), EmailDelivery, pk) == outbox.Sent.SENT
    row = EmailDelivery.objects.get(pk=pk)
    assert (row.status, row.attempts) == ("queued", 0)


def test_a_refusal_is_retried_until_the_retries_are_spent_and_then_fails(approval, settings):
    settings.HITL_EMAIL_RETRIES = 2
    channel = Scripted(*[outbox.Failed("421 try later")] * 3)
    (pk,) = channel.queue(approval)
    assert [outbox.send(channel, EmailDelivery, pk) for _ in range(4)] == ["failed", "failed", "failed", "not claimed"]
    row = EmailDelivery.objects.get(pk=pk)
    assert (row.status, row.attempts, row.last_error) == ("failed", 3, "421 try later")


def test_a_permanent_refusal_fails_at_once_and_is_not_retried(approval):
    channel = Scripted(outbox.Failed("550 no such mailbox", permanent=True))
    (pk,) = channel.queue(approval)
    assert outbox.send(channel, EmailDelivery, pk) == outbox.Sent.FAILED
    assert not outbox.still_queued(EmailDelivery, pk) and EmailDelivery.objects.get(pk=pk).status == "failed"


def test_a_row_no_longer_wanted_is_closed_unsent_with_its_reason(approval):
    channel = Scripted(outbox.Unwanted("The device was removed."))
    (pk,) = channel.queue(approval)
    assert outbox.send(channel, EmailDelivery, pk) == outbox.Sent.CLOSED
    row = EmailDelivery.objects.get(pk=pk)
    assert (row.status, row.last_error) == ("closed", "The device was removed.") and channel.sent_rows == []


def test_a_decided_approvals_copy_is_never_sent(approval, bob):
    channel = Scripted()
    (pk,) = channel.queue(approval)
    approval_services.decide(approval.pk, user=bob, approve=True, via="api", shown_hash=approval.shown_hash)
    assert outbox.send(channel, EmailDelivery, pk) == outbox.Sent.CLOSED and channel.sent_rows == []


def test_the_sweep_sends_again_once_what_a_lost_task_left(approval, settings):
    channel = Scripted()
    (pk,) = channel.queue(approval)  # queued; its task lost (a Redis restart)
    assert outbox.lost(channel).to_send == []  # not stale yet: its task may still come
    later = timezone.now() + timedelta(seconds=settings.HITL_EMAIL_STALE_SECONDS + 1)
    assert outbox.lost(channel, now=later).to_send == [(EmailDelivery, pk)]
    assert outbox.lost(channel, now=later).to_send == []  # stamped: the next sweep leaves it to the task enqueued


def test_a_copy_is_warned_once_per_deadline_and_again_for_an_extended_one(approval, bob, settings):
    channel = Scripted()
    (pk,) = channel.queue(approval)
    outbox.send(channel, EmailDelivery, pk)
    approval.expires_at = timezone.now() + timedelta(minutes=5)
    approval.save(update_fields=["expires_at"])
    made = channel.queue_warnings(approval)
    assert len(made) == 1 and channel.queue_warnings(approval) == []
    assert EmailDelivery.objects.get(pk=pk).warned_for == approval.expires_at
    approval.expires_at += timedelta(minutes=5)
    approval.save(update_fields=["expires_at"])
    channel.queue_warnings(approval)  # email's one warning a person was made: none again, but the copy knows
    assert EmailDelivery.objects.get(pk=pk).warned_for == approval.expires_at


def test_every_channel_is_on_the_base_with_one_wiring_and_one_sweep():
    assert {channel.name for channel in channels.registered()} == {"email", "push", "slack", "telegram"}
    tasks = [entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()]
    assert tasks.count("deliveries.tasks.sweep") == 1
    assert not [task for task in tasks if task.split(".")[0] in {"slacklink", "telegramlink", "emaillink", "pushlink"}]
    assert delivery_tasks.sweep.name == "deliveries.tasks.sweep"


@pytest.mark.parametrize("name", ["email", "push", "slack", "telegram"])
def test_every_channels_admin_lists_its_copies_read_only_with_send_again(name, admin_client, admin_user, rf):
    model = channels.get(name).delivery
    meta = model._meta
    page = admin_client.get(f"/admin/{meta.app_label}/{meta.model_name}/?status__exact=failed")
    assert page.status_code == 200
    assert admin_client.get(f"/admin/{meta.app_label}/{meta.model_name}/add/").status_code == 403
    request = rf.get("/")
    request.user = admin_user
    model_admin = admin.site._registry[model]
    assert "send_again" in model_admin.get_actions(request) and model_admin.channel is channels.get(name)
    assert not model_admin.has_change_permission(request)
