"""Many deciders at once on the same approval, each in its own thread with its own database
connection: approve, reject, approve-all and the expiry. One decision wins, the tool runs at most
once, and the audit record is written once. Runs on SQLite and, in the PostgreSQL pass, there."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import Approval
from approvals.services import AlreadyDecided, decide, decide_all, expire_overdue
from chat import services
from chat.models import OutboxEmail, ToolCall
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)


def race(*actions) -> list:
    """Run the actions together (lined up on a barrier); each returns what it got, or its exception."""
    barrier = threading.Barrier(len(actions))
    results = [None] * len(actions)

    def run(index, action):
        try:
            barrier.wait()
            results[index] = action()
        except Exception as exc:  # noqa: BLE001  (the result under test)
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, a)) for i, a in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.parametrize("round_", range(5))
def test_approve_reject_approve_all_and_expiry_at_once_make_one_decision(alice, bob, agent, round_):
    agent.approval_timeout_seconds = 1
    agent.save()
    conversation = services.start_conversation(user=alice, agent=agent, content="email dan@example.com about rent")
    [approval] = pending_approvals(conversation)
    later = timezone.now() + timedelta(seconds=2)

    results = race(
        lambda: decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=""),
        lambda: decide(approval.pk, user=bob, approve=False, via="dashboard", reason="no", shown_hash=""),
        lambda: decide_all(conversation_id=conversation.pk, user=alice, via="api", shown=None).decided,
        lambda: expire_overdue(now=later),
        lambda: decide(approval.pk, user=bob, approve=True, via="api", shown_hash=""),
    )

    approval.refresh_from_db()
    won = [r for r in results if isinstance(r, Approval) or (isinstance(r, list) and r)]
    lost = [r for r in results if isinstance(r, AlreadyDecided) or r == []]
    assert len(won) == 1 and len(won) + len(lost) == len(results), results
    assert OutboxEmail.objects.count() == (1 if approval.status == "approved" else 0)
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == {"approved": "succeeded", "rejected": "rejected", "expired": "expired"}[approval.status]


def test_many_approvers_clicking_approve_at_once_run_the_tool_once(alice, bob, carol, agent):
    conversation = services.start_conversation(user=alice, agent=agent, content="email erin@example.com about keys")
    [approval] = pending_approvals(conversation)
    users = [alice, bob, carol] * 3

    results = race(*[lambda user=user: decide(approval.pk, user=user, approve=True, via="dashboard", shown_hash="") for user in users])

    assert sum(isinstance(r, Approval) for r in results) == 1
    assert sum(isinstance(r, AlreadyDecided) for r in results) == len(users) - 1
    assert OutboxEmail.objects.count() == 1


@pytest.mark.parametrize("round_", range(3))
def test_three_votes_at_once_on_a_two_of_three_quorum_approve_once_and_run_once(alice, agent, round_):
    from approvals.models import Vote
    from approvals.services import AlreadyVoted
    from tests.approvals.conftest import member
    from tests.approvals.deciders.test_routes import route

    voters = [member(name, "finance") for name in ("dana", "erin", "fred")]
    route(agent, quorum=2)
    conversation = services.start_conversation(user=alice, agent=agent, content="write hi to a.txt")
    [approval] = pending_approvals(conversation)

    results = race(*[
        (lambda voter=voter: decide(approval.pk, user=voter, approve=True, via="api", shown_hash=""))
        for voter in voters
    ])

    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED, results
    votes = list(Vote.objects.filter(approval=approval))
    assert len(votes) == 2 and approval.decided_by_id == max(votes, key=lambda v: v.chain_position).user_id
    assert sum(isinstance(r, AlreadyDecided) for r in results) == 1, results
    assert not any(isinstance(r, (AlreadyVoted, AssertionError)) for r in results)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED
    from approvals import audit

    assert audit.verify().is_intact
