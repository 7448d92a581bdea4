"""Approvers, expiry and webhooks end to end: the API on daphne, the loop and webhook deliveries in
a real Celery worker, expiry by a real Celery beat."""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.utils import timezone
from websockets.sync.client import connect

from approvals.models import Approval, Webhook, WebhookDelivery
from approvals.announcements.webhooks import SIGNATURE_HEADER, verify
from chat.models import Conversation
from tests.conftest import wait_until
from tests.e2e.approvals.conftest import start_on
from tests.e2e.chat.test_api_e2e import last_reply, session_headers, start, wait_for_pending, wait_for_status
from tests.standins.webhook_receiver import webhook_receiver  # noqa: F401  (the fixture)

pytestmark = pytest.mark.e2e


def test_a_requester_cannot_approve_their_high_risk_call_and_an_approver_can(e2e, api_for, alice, bob, ops_agent):
    owner = api_for(alice)
    conversation_id = start_on(owner, "ops", "delete a.txt")
    [approval] = wait_for_pending(owner, conversation_id, 1)
    assert approval["risk"] == "high"

    refused = owner.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})
    assert refused.status_code == 403 and "four eyes" in refused.json()["detail"]
    assert Approval.objects.get(pk=approval["id"]).status == "pending"

    accepted = api_for(bob).post(f"approvals/{approval['id']}/decision", {"decision": "reject", "reason": "change freeze"})
    assert accepted.status_code == 200
    wait_for_status(conversation_id, "idle")
    assert "Rejected by bob: change freeze" in last_reply(conversation_id)


def test_an_overdue_approval_expires_and_the_model_hears_it_timed_out(e2e, api_for, alice, agent):
    agent.approval_timeout_seconds = 1
    agent.save()
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt")
    [approval] = wait_for_pending(api, conversation_id, 1)

    wait_for_status(conversation_id, "idle", timeout=15)

    expired = Approval.objects.get(pk=approval["id"])
    assert (expired.status, expired.decided_by, expired.decided_via) == ("expired", None, "timeout")
    assert last_reply(conversation_id) == "I did not delete a.txt (Not run: the approval timed out.)"
    late = api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})
    assert late.status_code == 409 and late.json()["status"] == "expired"


def test_decisions_racing_the_expiry_have_exactly_one_outcome(e2e, api_for, alice, agent):
    agent.approval_timeout_seconds = 1
    agent.save()
    api = api_for(alice)
    conversation_id = start(api, "write hi to a.txt")
    [pending] = wait_for_pending(api, conversation_id, 1)
    deadline = Approval.objects.get(pk=pending["id"]).expires_at
    wait_until(lambda: timezone.now() >= deadline, timeout=5, message="the deadline")

    # At the deadline, while beat is expiring it: approve, reject and approve-all at once.
    requests = [
        (f"approvals/{pending['id']}/decision", {"decision": "approve"}),
        (f"approvals/{pending['id']}/decision", {"decision": "reject", "reason": "race"}),
        (f"conversations/{conversation_id}/approve-all", {"ids": [pending["id"]]}),
    ]
    with ThreadPoolExecutor(len(requests)) as pool:
        responses = list(pool.map(lambda r: api_for(alice).post(*r), requests))

    stored = Approval.objects.get(pk=pending["id"])
    single, approve_all = responses[:2], responses[2]
    winners = [r for r in single if r.status_code == 200] + ([approve_all] if approve_all.json()["approved"] else [])
    assert all(r.status_code in (200, 409) for r in single)
    if stored.status == "expired":
        assert winners == [] and stored.decided_via == "timeout"
    else:
        assert len(winners) == 1 and stored.decided_via == "api"
    wait_for_status(conversation_id, "idle")
    assert (e2e.sandbox_root / conversation_id / "a.txt").exists() == (stored.status == "approved")


def test_webhooks_get_both_events_signed_and_a_failing_one_is_retried(e2e, api_for, alice, agent, webhook_receiver):
    webhook_receiver.failures_left = 2  # the first two calls get a 500
    Webhook.objects.create(url=webhook_receiver.url, secret="hush")
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt")
    [approval] = wait_for_pending(api, conversation_id, 1)
    wait_for_status(conversation_id, "waiting_for_approval")  # the loop does not wait for the webhook
    requested = wait_until(
        lambda: WebhookDelivery.objects.filter(event="approval.requested", status="succeeded").first(),
        timeout=15,
        message="the requested event delivered",
    )
    assert requested.attempts == 3  # 500, 500 (retried with backoff), then 204

    api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})

    decided = wait_until(
        lambda: WebhookDelivery.objects.filter(event="approval.decided", status="succeeded").first(),
        timeout=15,
        message="the decided event delivered",
    )
    assert decided.attempts == 1
    assert [call.json["event"] for call in webhook_receiver.calls] == ["approval.requested"] * 3 + ["approval.decided"]
    assert all(verify(call.headers[SIGNATURE_HEADER], call.body, "hush") for call in webhook_receiver.calls)
    assert webhook_receiver.calls[-1].json["approval"]["decided_by"] == "alice"


def test_the_dashboard_socket_tells_approvers_of_new_approvals(e2e, api_for, alice, bob, agent):
    with connect(f"{e2e.ws_url}/ws/approvals/", origin=e2e.base_url, additional_headers=session_headers(bob)) as socket:
        start(api_for(alice), "delete a.txt")
        signal = socket.recv(timeout=15)
    assert 'id="dashboard-signal"' in signal and 'data-event="approval.requested"' in signal


def test_the_dashboard_socket_refuses_non_approvers(e2e, alice):
    with pytest.raises(Exception) as refused:
        with connect(f"{e2e.ws_url}/ws/approvals/", origin=e2e.base_url, additional_headers=session_headers(alice)) as socket:
            socket.recv(timeout=5)
    assert "4403" in str(refused.value) or "403" in str(refused.value)


def test_the_api_lists_with_filters(e2e, api_for, alice, bob, agent, ops_agent):
    owner = api_for(alice)
    first = start(owner, "delete a.txt")
    second = start_on(owner, "ops", "email x@example.com about y")
    wait_for_pending(owner, first, 1)
    wait_for_pending(owner, second, 1)
    approver = api_for(bob)

    by_agent = approver.get("approvals", agent="ops").json()
    by_tool = approver.get("approvals", tool="delete_file").json()
    later = approver.get("approvals", since="2999-01-01T00:00:00Z").json()

    assert [i["conversation_id"] for i in by_agent["items"]] == [second]
    assert [i["tool_call"]["name"] for i in by_tool["items"]] == ["delete_file"]
    assert later == {"items": [], "count": 0}
    assert json.dumps(approver.get("approvals", limit=1).json()["items"]).count('"id"') >= 1
    assert Conversation.objects.count() == 2
