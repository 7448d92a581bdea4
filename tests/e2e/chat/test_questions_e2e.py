"""Questions and plans end to end: the API on daphne, the loop in a real Celery worker, expiry by a
real Celery beat, pushes over a real websocket."""
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.utils import timezone

from approvals.models import Approval
from chat.models import ToolCall
from tests.conftest import wait_until
from tests.e2e.chat.test_api_e2e import last_reply, start, wait_for_pending, wait_for_status

pytestmark = pytest.mark.e2e


def test_answers_racing_a_questions_expiry_have_exactly_one_outcome(e2e, api_for, alice, agent):
    agent.approval_timeout_seconds = 1
    agent.save()
    api = api_for(alice)
    conversation_id = start(api, "ask me for a number between 1 and 10")
    [pending] = wait_for_pending(api, conversation_id, 1)
    assert (pending["kind"], pending["question"]["min"], pending["question"]["max"]) == ("question", 1, 10)
    deadline = Approval.objects.get(pk=pending["id"]).expires_at
    wait_until(lambda: timezone.now() >= deadline, timeout=5, message="the deadline")

    # At the deadline, while beat is expiring it: two answers and a decline at once.
    bodies = [{"answer": 3}, {"answer": 7}, {"decline": True, "reason": "race"}]
    with ThreadPoolExecutor(len(bodies)) as pool:
        responses = list(pool.map(lambda body: api_for(alice).post(f"approvals/{pending['id']}/answer", body), bodies))

    assert all(r.status_code in (200, 409) for r in responses), [r.text for r in responses]
    winners = [r.json() for r in responses if r.status_code == 200]
    stored = Approval.objects.get(pk=pending["id"])
    if stored.status == "expired":
        assert winners == [] and stored.decided_via == "timeout"
    else:
        assert len(winners) == 1 and winners[0]["status"] == stored.status and stored.decided_via == "api"
    wait_for_status(conversation_id, "idle")
    expected = {
        "expired": "No answer came, so I will not go on with that.",
        "declined": "You declined to answer (race).",
        "answered": f"You answered: {stored.answer}.",
    }[stored.status]
    assert last_reply(conversation_id) == expected
    assert ToolCall.objects.get(pk=pending["tool_call"]["id"]).status == {
        "expired": "expired", "declined": "rejected", "answered": "succeeded",
    }[stored.status]


def test_a_plan_approved_without_its_optional_step_through_the_api(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "plan a tidy-up")
    [plan] = wait_for_pending(api, conversation_id, 1)
    assert [step["optional"] for step in plan["plan"]["steps"]] == [False, True, False]
    assert api.post("approvals/decisions", {"ids": [plan["id"]], "decision": "approve"}).json()["not_allowed"] == [plan["id"]]
    approved = api.post(f"approvals/{plan['id']}/decision", {"decision": "approve", "steps": [1, 3]})
    assert approved.status_code == 200, approved.text
    wait_for_status(conversation_id, "idle")
    assert last_reply(conversation_id) == "Approved steps: 1, 3."
