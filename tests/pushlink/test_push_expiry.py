"""The warning before expiry, and Extend: each device that got the request is warned once in its place
(and only those), a lost warning is sent once by the sweep, Extend pushes the deadline back once, and
a decided approval's warning is replaced by the outcome."""
import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from approvals.signals import approvals_expiring
from deliveries import tasks as delivery_tasks
from pushlink.channel import CHANNEL
from pushlink.models import PushNotification
from tests.conftest import only_pending, start_conversation, warned_without_its_signal
from tests.pushlink.devices import decide, queued_unsent, requests_to, subscribe, through_the_loop, with_deadline
from tests.standins.fake_push import FakePush

pytestmark = pytest.mark.django_db


def expiring(approval: Approval) -> None:
    """As the expiry sweep does once the warning is due."""
    approvals_expiring.send(sender=Approval, approvals=[Approval.objects.get(pk=approval.pk)])


def warnings_to(fake: FakePush, subscription: dict, approval: Approval) -> list[dict]:
    return [m for m in fake.messages(subscription["endpoint"]) if m["approval_id"] == approval.pk and m["type"] == "warning"]


@through_the_loop
def test_each_device_that_got_the_request_is_warned_once_in_its_place(fake, alice, bob, agent):
    phone, laptop, bobs = subscribe(fake, alice), subscribe(fake, alice), subscribe(fake, bob)
    approval = with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt")))
    at = f"{approval.expires_at:%H:%M} UTC"

    expiring(approval)
    expiring(approval)  # a second round, or a restart: nothing more

    (warned,), (other,) = warnings_to(fake, phone, approval), warnings_to(fake, laptop, approval)
    assert not warnings_to(fake, bobs, approval)
    assert warned["tag"] == f"approval-{approval.pk}" and warned["title"] == f"Expires at {at}: Write a.txt (5 bytes)"
    assert warned["body"] == "Write a.txt (5 bytes) — asked by alice (Demo agent)\n\nDecide it on the site before then, or extend its deadline."
    assert [a["action"] for a in warned["actions"]] == ["extend", "view"] and set(warned["tokens"]) == {"extend"}
    assert other["body"] == warned["body"]
    assert PushNotification.objects.filter(kind="warning", status="sent").count() == 2


@through_the_loop
def test_a_device_never_sent_the_request_is_not_warned(fake, alice, agent, settings):
    subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")

    expiring(approval)

    assert not PushNotification.objects.filter(kind="warning").exists() and not fake.received


@through_the_loop
def test_a_warning_lost_with_its_task_is_sent_once_by_the_sweep(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    approval = with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt")))
    ((_, warning_id),) = CHANNEL.queue_warnings(approval)  # queued, its task lost (a worker killed)
    settings.HITL_PUSH_STALE_SECONDS = 0

    delivery_tasks.sweep.delay()
    delivery_tasks.sweep.delay()
    expiring(approval)

    assert len(warnings_to(fake, phone, approval)) == 1 and PushNotification.objects.get(pk=warning_id).status == "sent"


@through_the_loop
def test_a_warning_whose_signal_was_lost_is_sent_once_by_the_sweep(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    approval = warned_without_its_signal(with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt"))))
    delivery_tasks.sweep()  # warned just now: the signal still has its chance
    assert not PushNotification.objects.filter(kind="warning").exists()
    settings.HITL_PUSH_STALE_SECONDS = 0

    delivery_tasks.sweep.delay()
    delivery_tasks.sweep.delay()  # a restart, or the next beat: nothing more

    (warned,) = warnings_to(fake, phone, approval)
    assert warned["tag"] == f"approval-{approval.pk}" and set(warned["tokens"]) == {"extend"}
    assert PushNotification.objects.get(kind="warning").status == "sent"
    expiring(approval)  # the signal after all: nothing more
    assert len(warnings_to(fake, phone, approval)) == 1


@through_the_loop
def test_the_sweep_sends_no_warning_for_a_decided_call_nor_an_expired_one(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    approval = warned_without_its_signal(with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt"))))
    settings.HITL_PUSH_STALE_SECONDS = 0

    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    delivery_tasks.sweep.delay()  # past its deadline (the expiry sweep has not run yet): too late to warn
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=5))
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    delivery_tasks.sweep.delay()

    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request", "decided"]
    assert not PushNotification.objects.filter(kind="warning").exists()


@through_the_loop
def test_a_request_sent_after_its_approval_was_warned_is_followed_by_the_warning(fake, alice, agent, settings):
    phone = subscribe(fake, alice)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    approval = warned_without_its_signal(with_deadline(approval))
    expiring(approval)  # no device sent the request yet: none to warn

    delivery_tasks.send.delay("push", "pushlink.PushNotification", row.pk)

    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request", "warning"]
    assert set(PushNotification.objects.values_list("kind", "status")) == {("request", "sent"), ("warning", "sent")}


@through_the_loop
def test_extend_from_the_warning_pushes_the_deadline_back_once_and_sends_the_request_again(fake, alice, agent):
    phone = subscribe(fake, alice)
    approval = with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt")))
    expiring(approval)
    (warned,) = warnings_to(fake, phone, approval)

    response = Client().post("/push/extend", json.dumps({"token": warned["tokens"]["extend"]}), content_type="application/json")

    extended = Approval.objects.get(pk=approval.pk)
    assert response.status_code == 200 and response.json()["outcome"] == "extended"
    assert response.json()["message"] == f"Extended: it now expires at {extended.expires_at:%H:%M} UTC."
    assert extended.expires_at > approval.expires_at and extended.extended_by == alice
    first, again = requests_to(fake, phone, approval)
    assert set(again["tokens"]) == {"approve", "reject"} and again["tag"] == first["tag"]
    assert not PushNotification.objects.filter(kind="warning").exists()  # the new deadline warns anew
    second = Client().post("/push/extend", json.dumps({"token": warned["tokens"]["extend"]}), content_type="application/json")
    assert (second.status_code, second.json()["outcome"]) == (409, "not extendable")

    expiring(extended)
    (warned_again,) = warnings_to(fake, phone, approval)[1:]
    assert [a["action"] for a in warned_again["actions"]] == ["view"]  # extended once: no Extend now
    assert decide(again["tokens"]["approve"], "approve")[0] == 200


@pytest.mark.parametrize("body", ["", "{}", '{"token": 5}', '{"token": "garbage"}'])
def test_an_extend_that_is_no_warnings_token_decides_nothing(body):
    response = Client().post("/push/extend", body, content_type="application/json")

    assert response.status_code in (400, 403) and response.json()["outcome"] in ("bad request", "invalid")


@through_the_loop
def test_a_decided_approvals_warning_is_replaced_by_the_outcome(fake, alice, agent):
    phone = subscribe(fake, alice)
    approval = with_deadline(only_pending(start_conversation(alice, agent, "write hello to a.txt")))
    expiring(approval)

    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)

    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request", "warning", "decided"]
    assert set(PushNotification.objects.values_list("status", flat=True)) == {"closed"}
