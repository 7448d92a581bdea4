"""Who may decide (four eyes), expiry and its race with a decision, deciding several at once."""
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from approvals.services import AlreadyDecided, NotAllowed, decide, decide_many, expire_overdue
from chat import services
from chat.scripted import SCRIPTED_REQUESTS
from chat.models import Conversation, ToolCall
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)



def test_high_risk_calls_of_the_ops_agent_need_an_approver(alice, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.approver_required and approval.risk == "high"

    with pytest.raises(NotAllowed):
        decide(approval.pk, user=alice, approve=True, via="chat", shown_hash="")

    approval.refresh_from_db()
    assert approval.status == "pending"


def test_an_approver_decides_what_the_owner_may_not(alice, bob, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(conversation)

    decide(approval.pk, user=bob, approve=False, via="dashboard", reason="ask ops first", shown_hash="")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("rejected", bob, "dashboard")
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE


def test_an_approver_may_not_approve_their_own_high_risk_call(bob, carol, ops_agent):
    conversation = start(bob, ops_agent, "delete a.txt")
    [approval] = pending_approvals(conversation)

    with pytest.raises(NotAllowed):
        decide(approval.pk, user=bob, approve=True, via="dashboard", shown_hash="")
    decide(approval.pk, user=carol, approve=True, via="dashboard", shown_hash="")

    approval.refresh_from_db()
    assert approval.decided_by == carol


def test_the_owner_still_decides_medium_risk_calls_of_the_ops_agent(alice, ops_agent):
    conversation = start(alice, ops_agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.risk == "medium" and not approval.approver_required

    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash="")

    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED


def test_a_typed_yes_decides_only_what_the_sender_may_and_says_what_waits(alice, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt and b.txt")

    services.post_message(conversation=conversation, user=alice, content="approve all 2")

    assert len(pending_approvals(conversation)) == 2
    assert conversation.messages.last().content == "Not approved: 2 calls are for an approver other than you to decide."


def test_overdue_approvals_expire_and_the_model_is_told(alice, agent):
    agent.approval_timeout_seconds = 60
    agent.save()
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.expires_at == approval.requested_at + timedelta(seconds=60)

    assert expire_overdue(now=timezone.now() + timedelta(seconds=30)) == []
    assert expire_overdue(now=timezone.now() + timedelta(seconds=61)) == [approval.pk]

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("expired", None, "timeout")
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.EXPIRED
    assert SCRIPTED_REQUESTS[-1]["messages"][-1]["content"] == "Not run: the approval timed out."
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE


def test_a_decision_after_the_expiry_is_a_conflict(alice, agent):
    agent.approval_timeout_seconds = 1
    agent.save()
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    expire_overdue(now=timezone.now() + timedelta(seconds=2))

    with pytest.raises(AlreadyDecided) as lost:
        decide(approval.pk, user=alice, approve=True, via="chat", shown_hash="")

    assert lost.value.approval.status == "expired"


def test_the_expiry_after_a_decision_changes_nothing(alice, agent):
    agent.approval_timeout_seconds = 1
    agent.save()
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash="")

    assert expire_overdue(now=timezone.now() + timedelta(seconds=2)) == []

    approval.refresh_from_db()
    assert approval.status == "approved"


def test_decide_many_reports_each_approval_once(alice, bob, agent, ops_agent):
    mine = start(alice, agent, "delete a.txt and b.txt")
    four_eyes = start(bob, ops_agent, "delete c.txt")
    first, second = pending_approvals(mine)
    [own_high_risk] = pending_approvals(four_eyes)
    decide(first.pk, user=alice, approve=True, via="chat", shown_hash="")

    outcome = decide_many(dict.fromkeys([first.pk, second.pk, own_high_risk.pk, 999999], ""), user=bob, approve=True, via="dashboard")

    assert [a.pk for a in outcome.decided] == [second.pk]
    assert outcome.already_decided == [first.pk]
    assert outcome.not_allowed == [own_high_risk.pk]  # approving needs four eyes; rejecting would not


def test_the_database_refuses_to_change_a_decided_approval(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=False, via="chat", reason="original reason", shown_hash="")

    for sql in [
        "UPDATE approvals_approval SET status = 'approved' WHERE id = %s",
        "UPDATE approvals_approval SET rejection_reason = 'rewritten' WHERE id = %s",
        "UPDATE approvals_approval SET decided_by_id = NULL WHERE id = %s",
    ]:
        with pytest.raises(IntegrityError, match="a decided approval is final"), transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, [approval.pk])

    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason) == ("rejected", "original reason")


def test_the_database_lets_a_pending_approval_be_decided(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE approvals_approval SET status = 'approved', decided_at = %s WHERE id = %s", [timezone.now(), approval.pk])
    approval.refresh_from_db()
    assert approval.status == "approved"
