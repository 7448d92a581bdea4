"""A decision request answers after its commit and one enqueue: everything else hears of the
decision in a worker (approvals.announcements), and nothing is lost when that enqueue fails."""
import pytest
from kombu.exceptions import OperationalError

from approvals import announcements
from approvals.models import Approval, Webhook, WebhookDelivery
from approvals.services import decide_many
from approvals.signals import approvals_decided
from chat.models import Conversation
from chat.recovery import claim_stalled
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def enqueued(monkeypatch):
    """The announcing tasks a decision sends, held back (the broker is not reached)."""
    sent = []
    monkeypatch.setattr(announcements.announce_decided, "delay", lambda *args: sent.append(args))
    return sent


@pytest.fixture
def heard():
    """What the receivers of approvals_decided were sent, and where."""
    calls = []

    def receiver(sender, approvals, **kwargs):
        calls.append(sorted(approval.pk for approval in approvals))

    approvals_decided.connect(receiver, dispatch_uid="test.heard")
    yield calls
    approvals_decided.disconnect(dispatch_uid="test.heard")


def test_a_decision_request_enqueues_one_task_and_runs_no_receiver(alice, agent, api_as, enqueued, heard):
    conversation = start(alice, agent, "write a to a.txt")
    [approval] = pending_approvals(conversation)

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})

    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert enqueued == [([approval.pk], [])]
    assert heard == []  # not in the request
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.WAITING_FOR_APPROVAL

    announcements.announce_decided(*enqueued[0])  # as the worker runs it

    assert heard == [[approval.pk]]
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.IDLE  # resumed and finished


def test_a_bulk_decision_over_many_conversations_enqueues_one_task(alice, bob, agent, enqueued, heard):
    conversations = [start(alice, agent, f"write {i} to {i}.txt") for i in range(3)]
    ids = [approval.pk for conversation in conversations for approval in pending_approvals(conversation)]

    outcome = decide_many(dict.fromkeys(ids, ""), user=bob, approve=True, via=Approval.Via.API)

    assert len(outcome.decided) == 3
    assert enqueued == [(sorted(ids), [])]
    announcements.announce_decided(*enqueued[0])
    assert heard == [sorted(ids)]
    assert set(Conversation.objects.values_list("status", flat=True)) == {Conversation.Status.IDLE}


def test_a_decision_whose_announcement_cannot_be_enqueued_keeps_its_webhooks_and_resumes_later(
    alice, agent, api_as, monkeypatch, settings, heard
):
    Webhook.objects.create(url="http://127.0.0.1:9/unreachable", secret="x")
    conversation = start(alice, agent, "write a to a.txt")
    [approval] = pending_approvals(conversation)

    def broker_down(*args):
        raise OperationalError("Redis is down")

    monkeypatch.setattr(announcements.announce_decided, "delay", broker_down)
    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})

    assert response.status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.APPROVED
    # The outbox was written with the decision: the webhook sweep sends it whatever became of the task.
    delivery = WebhookDelivery.objects.get(approval=approval, event=Webhook.Event.DECIDED)
    assert delivery.status == WebhookDelivery.Status.PENDING and delivery.payload["approval"]["status"] == "approved"
    assert heard == []
    settings.HITL_STALL_SECONDS = 0
    assert claim_stalled() == [str(conversation.pk)]  # the sweep resumes the decided turn
    assert Conversation.objects.get(pk=conversation.pk).status == Conversation.Status.RUNNING


def test_the_bulk_route_answers_in_statements_that_do_not_grow_with_the_ids(alice, bob, agent, api_as, enqueued):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.approvals.services.test_bulk_api import make_pending

    api = api_as(bob)
    api.get("approvals", limit=1)  # the token's first use is stamped once, outside the count

    def decide_counted(ids):
        with CaptureQueriesContext(connection) as queries:
            response = api.post("approvals/decisions", {"ids": ids, "decision": "approve"})
        decided = response.json()["decided"]
        assert [item["id"] for item in decided] == ids and {item["decided_by"] for item in decided} == {"bob"}
        return len(queries), decided

    few, many = make_pending(alice, agent, 5), make_pending(alice, agent, 50)
    for ids in (few, many):  # one of each edited (by its requester), as the answer shows
        Approval.objects.filter(pk=ids[0]).update(edited_by=alice)

    (few_queries, few_items), (many_queries, many_items) = decide_counted(few), decide_counted(many)
    assert few_queries == many_queries
    assert few_items[0]["edited_by"] == many_items[0]["edited_by"] == "alice" and many_items[1]["edited_by"] is None
