"""The pushlink tests' side of Web Push: a browser subscribing as the profile page's script does, the
notifications a device got, a decision posted with a notification's token, a notification queued by
hand, an approval given a deadline."""
import json
from datetime import timedelta

import pytest
from django.test import Client

from approvals.models import Approval
from pushlink import keys
from pushlink.channel import CHANNEL
from pushlink.models import PushNotification
from tests.conftest import client_for, only_pending, start_conversation
from tests.standins.fake_push import FakePush

through_the_loop = pytest.mark.django_db(transaction=True)


def subscribe(fake: FakePush, user, *, user_agent: str = "Mozilla/5.0 Chrome/140.0") -> dict:
    """As the profile page's script does: subscribe with the site's key, POST it."""
    subscription = fake.subscribe(keys.public_key())
    response = client_for(user).post("/push/subscriptions", subscription, content_type="application/json", HTTP_USER_AGENT=user_agent)
    assert response.status_code == 201, response.content
    return subscription


def decide(token: str, decision: str, **extra):
    response = Client().post("/push/decide", json.dumps({"token": token, "decision": decision, **extra}), content_type="application/json")
    return response.status_code, response.json()


def requests_to(fake: FakePush, subscription: dict, approval: Approval) -> list[dict]:
    return [m for m in fake.messages(subscription["endpoint"]) if m["approval_id"] == approval.pk and m["type"] == "request"]


def queued_unsent(settings, user, agent, text: str) -> tuple[Approval, PushNotification]:
    """An approval requested while push was off, then queued by hand: its notification not yet sent."""
    settings.HITL_PUSH_NOTIFICATIONS = False
    approval = only_pending(start_conversation(user, agent, text))
    settings.HITL_PUSH_NOTIFICATIONS = True
    (notification_id,) = CHANNEL.queue(approval)
    return approval, PushNotification.objects.get(pk=notification_id)


def with_deadline(approval: Approval) -> Approval:
    """The demo agent waits forever: give this approval the deadline of a 30-minute timeout."""
    Approval.objects.filter(pk=approval.pk).update(expires_at=approval.requested_at + timedelta(minutes=30))
    return Approval.objects.get(pk=approval.pk)
