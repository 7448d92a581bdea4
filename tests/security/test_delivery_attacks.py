"""The deliveries base under an operator's worst day: a worker killed on a row's last attempt, a
push service down while an extend sends the request again, then a decision. Real channels (email
over Django's mail outbox, push over tests/standins/fake_push.py), eager Celery, no sleeps."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from deliveries import outbox
from emaillink.channel import CHANNEL as EMAIL
from emaillink.models import EmailDelivery
from pushlink.channel import CHANNEL as PUSH
from pushlink.models import PushNotification
from tests.conftest import pending_approvals, start_conversation
from tests.standins.fake_push import FakePush
from tests.pushlink.devices import subscribe, with_deadline

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake():
    with FakePush() as push:
        yield push


def only_pending(conversation) -> Approval:
    (approval,) = pending_approvals(conversation)
    return approval


def claimed_mail_with_no_retry_left(alice, agent, settings) -> int:
    """alice's mail of a pending call, queued (not sent: email was off when it was asked) and
    claimed for its one and only attempt."""
    settings.HITL_EMAIL_APPROVALS, settings.HITL_EMAIL_RETRIES = False, 0
    alice.email = "alice@example.org"
    alice.save(update_fields=["email"])
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    settings.HITL_EMAIL_APPROVALS = True
    (pk,) = EMAIL.queue(approval)
    assert outbox.claim(EMAIL, EmailDelivery, pk) is not None
    return pk


def test_a_row_whose_last_attempt_was_lost_with_its_worker_fails_visibly_and_can_be_sent_again(alice, agent, settings):
    """A worker killed (or a send that raised) on the last attempt leaves the row queued with its
    retries spent: no send claims it and the sweep skipped it, so it waited forever, out of reach
    of the admin's "send again" (failed rows only). The sweep now marks it failed."""
    pk = claimed_mail_with_no_retry_left(alice, agent, settings)  # its worker dies here, on its only attempt

    later = timezone.now() + timedelta(seconds=settings.HITL_EMAIL_STALE_SECONDS + 1)
    found = outbox.lost(EMAIL, now=later)

    row = EmailDelivery.objects.get(pk=pk)
    assert found.to_send == [] and (row.status, row.attempts) == ("failed", 1) and row.last_error
    assert outbox.retry_failed(EMAIL, [pk]) == [pk]  # the operator's "send again" reaches it now
    assert EmailDelivery.objects.get(pk=pk).status == "queued"


def test_a_row_whose_last_attempt_is_still_on_its_way_is_left_alone(alice, agent, settings):
    pk = claimed_mail_with_no_retry_left(alice, agent, settings)

    outbox.lost(EMAIL)  # claimed just now: not stale, its send may still finish

    assert EmailDelivery.objects.get(pk=pk).status == "queued"


def test_a_device_shown_the_request_gets_the_outcome_though_its_extended_resend_failed(fake, alice, agent, settings):
    """An extend sends the request again (push cannot rewrite it); with the push service down that
    resend fails. The device still shows the first request with its actions: deciding on the site
    must replace it with the outcome, not close the row unsent."""
    settings.HITL_PUSH_RETRIES = 0
    phone = subscribe(fake, alice)
    approval = with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt")))
    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request"]
    fake.stop()

    approval_services.extend(approval.pk, user=alice, via="chat")
    (row,) = PushNotification.objects.filter(approval=approval, kind="request")
    assert row.status == "failed"

    fake.start()
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)

    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request", "decided"]
    assert PushNotification.objects.get(pk=row.pk).status == "closed"


def test_a_device_shown_the_request_gets_the_outcome_while_its_resend_waits(fake, alice, agent):
    """The same with the resend still queued (its retry on its way, or lost with Redis)."""
    phone = subscribe(fake, alice)
    approval = with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt")))
    (row,) = PushNotification.objects.filter(approval=approval, kind="request")
    outbox.requeue(PushNotification, PUSH.sent(approval))  # what an extend does, its send not run yet

    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)

    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request", "decided"]
    assert PushNotification.objects.get(pk=row.pk).status == "closed"
    assert outbox.send(PUSH, PushNotification, row.pk) == outbox.Sent.NOT_CLAIMED  # and the queued resend sends nothing


def test_a_queued_row_never_shown_is_still_closed_unsent(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    settings.HITL_PUSH_NOTIFICATIONS = False
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    settings.HITL_PUSH_NOTIFICATIONS = True
    (pk,) = PUSH.queue(approval)

    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)

    assert fake.messages(phone["endpoint"]) == [] and PushNotification.objects.get(pk=pk).status == "closed"
