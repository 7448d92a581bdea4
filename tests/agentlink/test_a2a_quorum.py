"""Routed calls over A2A: an approve below the quorum is a vote, counted and answered as such while
the task still waits; the owner may not approve a routed call."""
import pytest
from google.protobuf.json_format import MessageToDict

from agentlink import decisions, handler
from approvals.deciders import routemaking
from tests.agentlink.a2a_client import State, a2a_task, apply, message, refused, sent, statuses
from tests.conftest import finance_group, pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


@pytest.fixture
def finance_route(ops_agent):
    """The ops agent's emails go to the finance group (dana and erin), two of whom must approve."""
    _, members = finance_group()
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)
    return members


def test_an_approve_below_the_quorum_is_a_vote_the_task_still_waits_and_the_reply_says_it_is_counted(alice, ops_agent, finance_route):
    dana, erin = finance_route
    task = a2a_task(alice, ops_agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(task.conversation)
    assert approval.quorum == 2

    outcome = apply(task, dana, {"decision_type": "approve"})

    assert (outcome.decided, outcome.voted) == (1, [approval])
    assert statuses(task) == ["pending"]
    vote = approval.votes.get()
    assert (vote.user, vote.via) == (dana, "a2a")
    assert decisions.notice(outcome) == (
        f"Your approval of #{approval.pk} send_email is counted: 1 of 2 approvals: dana. It is still pending: 1 more must approve it."
    )
    assert sent(task).status.state == State.TASK_STATE_INPUT_REQUIRED
    assert "already voted" in refused(task, dana, {"decision_type": "approve"}).message

    # The handler's answer to the reply: the same words, over a task that still waits.
    sent(task)
    assert handler._continue(task, erin, message({"decision_type": "approve"})) == ""
    assert statuses(task) == ["approved"]
    approval.refresh_from_db()
    assert (approval.decided_by, approval.decided_via) == (erin, "a2a")


def test_the_handler_answers_a_vote_with_the_count_and_the_call_pending(alice, ops_agent, finance_route):
    dana, _ = finance_route
    task = a2a_task(alice, ops_agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(task.conversation)

    notice = handler._continue(task, dana, message({"decisions": [{"id": approval.pk, "decision_type": "approve"}]}))

    assert notice.startswith(f"Your approval of #{approval.pk} send_email is counted: 1 of 2 approvals: dana.")
    assert MessageToDict(sent(task))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_the_owner_may_not_approve_a_routed_call_and_is_told_it_is_routed(alice, ops_agent, finance_route):
    task = a2a_task(alice, ops_agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(task.conversation)

    refusal = refused(task, alice, {"decision_type": "approve"})

    assert refusal.message == f"Approval #{approval.pk} is routed: only members of its approver groups decide it, never its requester."
    assert statuses(task) == ["pending"] and not approval.votes.exists()
