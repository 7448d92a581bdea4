"""Web Push deliveries (the deliveries outbox): a device the push service forgot is removed, a push
service down leaves the notification queued for the sweep, a 503 is retried until the retries run out,
keys that cannot encrypt and a push signed with another key fail for good, and failures are listed
for operators. The push service is tests/standins/fake_push.py, reached through pywebpush."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from deliveries import outbox
from deliveries import tasks as delivery_tasks
from pushlink.channel import CHANNEL
from pushlink.models import PushNotification, PushSubscription
from tests.conftest import client_for
from tests.pushlink.devices import queued_unsent, requests_to, subscribe, through_the_loop

pytestmark = pytest.mark.django_db


@through_the_loop
def test_stored_keys_that_cannot_encrypt_fail_for_good_without_retrying(fake, alice, agent, settings):
    subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    PushSubscription.objects.update(p256dh="AAAA")  # as if written past the checks

    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert row.status == "failed" and not outbox.still_queued(PushNotification, row.pk)


@through_the_loop
def test_a_device_the_push_service_forgot_is_removed_and_the_failure_kept_for_operators(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    fake.gone.add(phone["endpoint"].rsplit("/", 1)[-1])
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")

    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert not PushSubscription.objects.exists()
    assert (row.status, row.subscription_id) == ("failed", None) and "410" in row.last_error
    assert outbox.still_queued(PushNotification, row.pk) is False


@through_the_loop
def test_a_push_service_down_leaves_it_queued_and_the_sweep_sends_it_once_back(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.stop()

    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.FAILED
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("queued", 1) and "ConnectionError" in row.last_error

    fake.start()
    settings.HITL_PUSH_STALE_SECONDS = 0

    delivery_tasks.sweep.delay()
    delivery_tasks.sweep.delay()

    row.refresh_from_db()
    assert (row.status, row.last_error) == ("sent", "")
    assert len(requests_to(fake, phone, approval)) == 1
    lost = outbox.lost(CHANNEL, now=timezone.now() + timedelta(seconds=1))
    assert (lost.to_send, lost.to_close, lost.to_rewrite) == ([], [], [])


@through_the_loop
def test_a_503_is_retried_and_a_send_that_keeps_failing_gives_up(fake, alice, agent, settings):
    settings.HITL_PUSH_RETRIES = 1
    subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = True

    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.FAILED
    assert outbox.still_queued(PushNotification, row.pk)
    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.FAILED
    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.NOT_CLAIMED

    row.refresh_from_db()
    assert (row.status, row.attempts) == ("failed", 2) and "503" in row.last_error


@through_the_loop
def test_a_push_signed_with_another_key_is_refused_by_the_push_service_and_not_retried(fake, alice, agent, settings):
    subscription = fake.subscribe(application_server_key="B" + "A" * 86)  # subscribed with another site's key
    client_for(alice).post("/push/subscriptions", subscription, content_type="application/json")
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")

    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert row.status == "failed" and "403" in row.last_error and fake.refused[-1][0] == 403


@through_the_loop
def test_a_notification_whose_approval_was_decided_before_sending_is_closed_unsent(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")

    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)

    assert PushNotification.objects.get(pk=row.pk).status == "closed"
    PushNotification.objects.filter(pk=row.pk).update(status="queued")  # as if the send came before the closing
    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.CLOSED
    assert not fake.messages(phone["endpoint"])


@through_the_loop
def test_a_removed_device_gets_nothing_more(fake, alice, agent, settings):
    subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    PushSubscription.objects.all().delete()

    assert outbox.send(CHANNEL, PushNotification, row.pk) == outbox.Sent.CLOSED
    assert not fake.received


def test_failed_deliveries_are_listed_for_operators(fake, alice, admin_client):
    response = admin_client.get("/admin/pushlink/pushnotification/?status__exact=failed")

    assert response.status_code == 200
