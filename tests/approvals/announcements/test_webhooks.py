"""Webhooks in-process (eager Celery): who is told, what they get, the signature, retries.
Replays and lost deliveries: tests/security/test_webhook_replay.py."""
import pytest

from approvals.models import Webhook, WebhookDelivery
from approvals.services import approve_edited, decide
from approvals.announcements.webhooks import SIGNATURE_HEADER, Attempt, deliver, give_up, verify
from chat.models import Conversation
from tests.conftest import pending_approvals, start_conversation as start
from tests.standins.webhook_receiver import webhook_receiver  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fast_retries(settings):
    settings.HITL_WEBHOOK_BACKOFF = 0
    settings.HITL_WEBHOOK_RETRIES = 3


def test_requested_and_decided_events_arrive_signed(alice, agent, webhook_receiver):
    Webhook.objects.create(url=webhook_receiver.url, secret="s3cret")
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=False, via="api", reason="keep it", shown_hash="")

    assert webhook_receiver.events() == ["approval.requested", "approval.decided"]
    for call in webhook_receiver.calls:
        assert call.headers[SIGNATURE_HEADER].startswith("t=") and ",v1=" in call.headers[SIGNATURE_HEADER]
        assert verify(call.headers[SIGNATURE_HEADER], call.body, "s3cret")
    decided = webhook_receiver.calls[1].json
    assert decided["approval"]["status"] == "rejected" and decided["approval"]["rejection_reason"] == "keep it"
    assert decided["tool"] == {"call_id": approval.tool_call_id, "name": "delete_file", "arguments": {"path": "a.txt"}}
    assert decided["conversation"]["url"].endswith(f"/conversations/{conversation.pk}/#tool-call-{approval.tool_call_id}")
    assert set(WebhookDelivery.objects.values_list("status", "attempts")) == {("succeeded", 1)}


def test_a_webhook_for_another_agent_is_not_told(alice, agent, ops_agent, webhook_receiver):
    Webhook.objects.create(url=webhook_receiver.url, secret="x", agent=ops_agent)
    start(alice, agent, "delete a.txt")
    assert webhook_receiver.calls == []


def test_each_attempt_is_recorded_until_one_succeeds(alice, agent, webhook_receiver):
    """(Retries with backoff run in a real worker: tests/e2e/approvals/test_approvals_e2e.py.)"""
    webhook_receiver.failures_left = 1
    Webhook.objects.create(url=webhook_receiver.url, secret="x")
    conversation = start(alice, agent, "delete a.txt")  # the first attempt fails
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("pending", 1, "HTTP 500")
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL  # the loop did not wait

    assert deliver(delivery.pk, attempt=2) is Attempt.SUCCEEDED

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code, delivery.last_error) == ("succeeded", 2, 204, "")


def test_an_unreachable_receiver_is_recorded_and_given_up_on(alice, agent):
    Webhook.objects.create(url="http://127.0.0.1:9/unreachable", secret="x")
    start(alice, agent, "delete a.txt")
    delivery = WebhookDelivery.objects.get()
    assert delivery.attempts == 1 and "ConnectError" in delivery.last_error

    give_up(delivery.pk)

    delivery.refresh_from_db()
    assert delivery.status == "failed"


def test_the_decided_event_carries_what_was_shown_and_approved(alice, agent, webhook_receiver):
    Webhook.objects.create(url=webhook_receiver.url, secret="s3cret")
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    approve_edited(approval.pk, user=alice, arguments={"path": "a.txt", "content": "edited"}, via="api", shown_hash="")

    decided = webhook_receiver.calls[1].json["approval"]
    assert decided["arguments"] == {"path": "a.txt", "content": "hi"}
    assert decided["approved_arguments"] == {"path": "a.txt", "content": "edited"} and decided["edited_by"] == "alice"
    assert decided["preview"]["kind"] == "file" and "New file a.txt" in decided["preview"]["text"]
    assert (decided["confirmation_required"], decided["confirmation_hint"]) == (False, "")
