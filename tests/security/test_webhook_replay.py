"""Finding 10: a captured webhook call could be replayed (the signature covered only the body and the
delivery id was unsigned), and a delivery whose task was lost with Redis was never sent."""
import contextlib
import hashlib
import hmac
import re
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from celery.exceptions import Retry
from django.utils import timezone

from approvals import tasks
from approvals.announcements import webhooks
from approvals.models import Webhook, WebhookDelivery
from tests.conftest import pending_approvals, start_conversation as start
from tests.standins.webhook_receiver import webhook_receiver  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

WEBHOOKS_DOC = Path(__file__).resolve().parents[2] / "docs" / "approvals-and-rules.md"


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.HITL_WEBHOOK_BACKOFF = 0
    settings.HITL_WEBHOOK_RETRIES = 3


def signed_call(receiver, secret: str, alice, agent):
    """The one call a webhook gets when alice's conversation asks for an approval."""
    Webhook.objects.create(url=receiver.url, secret=secret)
    start(alice, agent, "delete a.txt")
    [call] = receiver.calls
    return call


def lost_delivery(alice, agent, receiver, *, attempts: int = 0) -> WebhookDelivery:
    """A pending delivery that nobody will send: its row committed, its task lost with Redis."""
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))  # no webhook yet: nothing sent
    Webhook.objects.create(url=receiver.url, secret="s3cret")
    [delivery_id] = webhooks.create_deliveries([approval], Webhook.Event.REQUESTED)  # and never enqueued
    WebhookDelivery.objects.filter(pk=delivery_id).update(attempts=attempts)
    return age(delivery_id)


def age(delivery_id: int) -> WebhookDelivery:
    """Let an hour pass since anyone touched the delivery."""
    WebhookDelivery.objects.filter(pk=delivery_id).update(updated_at=timezone.now() - timedelta(hours=1))
    return WebhookDelivery.objects.get(pk=delivery_id)


def sweep() -> None:
    """One beat of the sweep. Eager Celery raises a failed attempt's request for a retry instead of
    scheduling it: that attempt is recorded and waits for the next sweep here."""
    with contextlib.suppress(Retry):
        tasks.resend_lost_webhooks()


def test_the_signature_covers_a_timestamp_and_the_body(alice, agent, webhook_receiver):
    call = signed_call(webhook_receiver, "s3cret", alice, agent)

    match = re.fullmatch(r"t=(\d+),v1=([0-9a-f]{64})", call.headers[webhooks.SIGNATURE_HEADER])
    assert match, call.headers[webhooks.SIGNATURE_HEADER]
    timestamp, signature = match.groups()
    assert abs(time.time() - int(timestamp)) < 60
    expected = hmac.new(b"s3cret", timestamp.encode() + b"." + call.body, hashlib.sha256).hexdigest()
    assert signature == expected


def test_a_call_replayed_after_the_tolerance_is_rejected(alice, agent, webhook_receiver):
    call = signed_call(webhook_receiver, "s3cret", alice, agent)
    header = call.headers[webhooks.SIGNATURE_HEADER]
    signed_at = int(re.search(r"t=(\d+)", header).group(1))
    assert webhooks.SIGNATURE_TOLERANCE_SECONDS == 300  # the five minutes docs/approvals-and-rules.md documents

    assert webhooks.verify(header, call.body, "s3cret", now=signed_at + 299)
    assert not webhooks.verify(header, call.body, "s3cret", now=signed_at + 301)  # replayed later
    assert not webhooks.verify(header, call.body, "s3cret", now=signed_at - 301)
    assert not webhooks.verify(header, call.body + b" ", "s3cret", now=signed_at)
    assert not webhooks.verify(header, call.body, "other", now=signed_at)
    # An old body under a new timestamp: the signature no longer matches.
    restamped = header.replace(f"t={signed_at}", f"t={signed_at + 600}")
    assert not webhooks.verify(restamped, call.body, "s3cret", now=signed_at + 600)
    for garbage in ["", "sha256=" + "0" * 64, "t=,v1=", "t=²,v1=x", f"t={signed_at},v1=é", f"v1={'0' * 64}"]:
        assert not webhooks.verify(garbage, call.body, "s3cret", now=signed_at)


def test_the_body_carries_the_delivery_id(alice, agent, webhook_receiver):
    call = signed_call(webhook_receiver, "s3cret", alice, agent)

    delivery = WebhookDelivery.objects.get()
    assert call.json["delivery_id"] == delivery.pk == int(call.headers["X-Hitl-Delivery"])
    assert call.json["event"] == "approval.requested"


def test_the_readme_snippet_accepts_a_call_and_rejects_a_replay(alice, agent, webhook_receiver):
    call = signed_call(webhook_receiver, "s3cret", alice, agent)
    snippet = re.search(r"Verify a webhook in Python:\n\n```python\n(.*?)```", WEBHOOKS_DOC.read_text(), re.S).group(1)

    def check(header: str) -> None:
        request = SimpleNamespace(headers={webhooks.SIGNATURE_HEADER: header})
        exec(snippet, {"secret": "s3cret", "request_body": call.body, "request": request})

    check(call.headers[webhooks.SIGNATURE_HEADER])
    replayed = webhooks.sign(call.body, "s3cret", timestamp=int(time.time()) - 600)
    with pytest.raises(AssertionError):
        check(replayed)


def test_the_sweep_sends_a_delivery_whose_task_was_lost(alice, agent, webhook_receiver):
    delivery = lost_delivery(alice, agent, webhook_receiver)
    assert webhook_receiver.calls == []

    sweep()

    [call] = webhook_receiver.calls
    assert call.json["delivery_id"] == delivery.pk
    assert webhooks.verify(call.headers[webhooks.SIGNATURE_HEADER], call.body, "s3cret")
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("succeeded", 1, 204)


def test_the_sweep_leaves_a_recent_delivery_to_its_task(alice, agent, webhook_receiver):
    webhook_receiver.failures_left = 1
    Webhook.objects.create(url=webhook_receiver.url, secret="s3cret")
    start(alice, agent, "delete a.txt")  # the first attempt fails; its retry waits its backoff
    assert len(webhook_receiver.calls) == 1

    sweep()

    assert len(webhook_receiver.calls) == 1
    assert WebhookDelivery.objects.get().attempts == 1


@pytest.mark.parametrize("send", [
    pytest.param(lambda delivery_id: sweep(), id="sent by the sweep"),
    pytest.param(lambda delivery_id: tasks.deliver_webhook.delay(delivery_id, 1), id="sent by a task that ran late"),
])
def test_a_delivery_being_sent_is_not_sent_again_by_a_concurrent_sweep(alice, agent, webhook_receiver, send):
    delivery = lost_delivery(alice, agent, webhook_receiver)
    webhook_receiver.during_call = sweep  # a beat of the sweep, while the call is out

    send(delivery.pk)

    assert webhook_receiver.errors == []
    assert len(webhook_receiver.calls) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)


def test_two_sweeps_claim_a_lost_delivery_once(alice, agent, webhook_receiver):
    """Two beats at once (or a second beat before the resent task has run): one resend."""
    delivery = lost_delivery(alice, agent, webhook_receiver)

    assert webhooks.claim_lost() == [(delivery.pk, 1)]
    assert webhooks.claim_lost() == []


def test_a_second_sweep_after_the_first_sends_nothing(alice, agent, webhook_receiver):
    webhook_receiver.failures_left = 10
    delivery = lost_delivery(alice, agent, webhook_receiver)

    sweep()
    sweep()

    assert len(webhook_receiver.calls) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 1)


def test_two_tasks_for_the_same_attempt_send_it_once(alice, agent, webhook_receiver):
    """A retry and the sweep's resend of the same attempt (or a redelivered message): one sends."""
    delivery = lost_delivery(alice, agent, webhook_receiver)
    webhook_receiver.during_call = lambda: tasks.deliver_webhook.delay(delivery.pk, 1)

    tasks.deliver_webhook.delay(delivery.pk, 1)
    tasks.deliver_webhook.delay(delivery.pk, 1)

    assert webhook_receiver.errors == []
    assert len(webhook_receiver.calls) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("succeeded", 1)


def test_the_sweep_gives_up_after_the_retries(alice, agent, webhook_receiver):
    webhook_receiver.failures_left = 100
    delivery = lost_delivery(alice, agent, webhook_receiver, attempts=2)  # lost after its second attempt

    for _ in range(5):
        sweep()
        age(delivery.pk)

    assert len(webhook_receiver.calls) == 2  # attempts 3 and 4: one plus HITL_WEBHOOK_RETRIES in all
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 4)


def test_the_sweep_fails_an_exhausted_delivery_without_sending_it(alice, agent, webhook_receiver):
    delivery = lost_delivery(alice, agent, webhook_receiver, attempts=4)  # its worker died in the last attempt

    sweep()

    assert webhook_receiver.calls == []
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 4)
