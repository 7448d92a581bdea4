"""Routed approvals on Telegram (issue 25): who is asked (the route's groups, the escalation groups
once it escalated), a press that is one vote of a quorum (counted, the call still waiting, every copy
showing the count and keeping its buttons), a vote cast elsewhere shown on every copy, one reminder
when the route's is due, and the sweep that sends what a lost task left. The Bot API is
tests/standins/fake_telegram.py; the loop runs inline (eager Celery)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.deciders import escalation, routemaking
from approvals import services as approval_services
from approvals.models import Approval, Vote
from approvals.permissions import APPROVERS_GROUP
from deliveries import outbox
from deliveries import tasks as delivery_tasks
from telegramlink.channel import CHANNEL
from telegramlink.models import ApprovalMessage, Reminder
from tests.conftest import finance_group, only_pending, start_conversation
from tests.telegramlink.phone import ALICE_TG, BOB_TG, CAROL_TG, edits_to, link, press, replies, request_to, say

pytestmark = pytest.mark.django_db(transaction=True)  # the signals that send are sent on commit

DANA_TG, ERIN_TG = 1005, 1006
EMAIL = "email bob@example.com about lunch"


@pytest.fixture
def finance(db):
    """The finance group and its two members, dana and erin."""
    _, members = finance_group()
    return members


def route_email(**fields):
    """The ops agent's emails go to finance, two of whom must approve."""
    return routemaking.create_route(
        created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=fields.pop("quorum", 2), **fields
    )


def linked(*pairs):
    for user, telegram_id in pairs:
        link(user, telegram_id)


def later(seconds: int = 5):
    return timezone.now() + timedelta(seconds=seconds)


def nothing_lost() -> bool:
    """Whether a sweep a few seconds from now finds nothing to send, close or rewrite again."""
    found = outbox.lost(CHANNEL, now=later())
    return (found.to_send, found.to_close, found.to_rewrite) == ([], [], [])


def buttons_on(fake, telegram_id: int, approval: Approval) -> dict[str, str]:
    """The buttons the phone shows now on the request of `approval` (after any edit)."""
    (message,) = [m for m in fake.delivered.values() if m["chat"]["id"] == telegram_id and f"(#{approval.pk})" in m["text"]]
    return fake.buttons(message)


# --- Who is asked ----------------------------------------------------------------------------------


def test_a_routed_call_goes_to_its_route_members_and_not_to_the_global_approvers(fake, alice, bob, carol, finance, ops_agent):
    dana, erin = finance
    route_email()
    linked((alice, ALICE_TG), (bob, BOB_TG), (carol, CAROL_TG), (dana, DANA_TG), (erin, ERIN_TG))

    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))

    assert approval.route_id is not None
    assert [account.user for account in CHANNEL.recipients(approval)] == [dana, erin]
    assert request_to(fake, DANA_TG, approval) and request_to(fake, ERIN_TG, approval)
    for outsider in (ALICE_TG, BOB_TG, CAROL_TG):
        assert not request_to(fake, outsider, approval)
    assert "Needs 2 approvals from finance, never the requester" in request_to(fake, DANA_TG, approval)["text"]
    assert "0 of 2 approvals" in request_to(fake, DANA_TG, approval)["text"]

    unrouted = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))  # four eyes, as before routes
    assert sorted(account.user.username for account in CHANNEL.recipients(unrouted)) == ["bob", "carol"]


def test_the_requester_in_the_routes_group_is_not_asked(fake, finance, ops_agent):
    dana, erin = finance
    route_email()
    linked((dana, DANA_TG), (erin, ERIN_TG))

    approval = only_pending(start_conversation(dana, ops_agent, EMAIL))

    assert [account.user for account in CHANNEL.recipients(approval)] == [erin]
    assert not request_to(fake, DANA_TG, approval)


# --- Votes -------------------------------------------------------------------------------------------


def test_a_press_below_the_quorum_is_one_vote_and_every_copy_counts_it_and_keeps_its_buttons(fake, alice, finance, ops_agent):
    dana, erin = finance
    route_email()
    linked((dana, DANA_TG), (erin, ERIN_TG))
    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))

    answer = press(fake, DANA_TG, buttons_on(fake, DANA_TG, approval)["Approve"])

    assert answer == "Your approval is counted: 1 of 2."
    approval.refresh_from_db()
    assert approval.status == "pending"
    (vote,) = Vote.objects.filter(approval=approval)
    assert (vote.user, vote.via) == (dana, "telegram")
    for telegram_id in (DANA_TG, ERIN_TG):
        (edit,) = edits_to(fake, telegram_id)
        assert "1 of 2 approvals: dana" in edit["text"] and "Approved by" not in edit["text"]
        assert "Approve" in buttons_on(fake, telegram_id, approval)
    assert ApprovalMessage.objects.filter(approval=approval, status="sent", votes_seen=1).count() == 2

    assert "already voted" in press(fake, DANA_TG, buttons_on(fake, DANA_TG, approval)["Approve"], query_id="q2")
    assert Vote.objects.filter(approval=approval).count() == 1

    assert press(fake, ERIN_TG, buttons_on(fake, ERIN_TG, approval)["Approve"], query_id="q3") == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", erin, "telegram")
    for telegram_id in (DANA_TG, ERIN_TG):
        outcome = edits_to(fake, telegram_id)[-1]["text"]
        assert "Approved by erin via telegram" in outcome and "2 of 2 approvals: dana, erin" in outcome
        assert buttons_on(fake, telegram_id, approval) == {}
    assert set(ApprovalMessage.objects.filter(approval=approval).values_list("status", flat=True)) == {"closed"}


def test_a_vote_cast_on_the_site_is_shown_on_every_telegram_copy(fake, alice, finance, ops_agent):
    dana, erin = finance
    route_email()
    linked((dana, DANA_TG), (erin, ERIN_TG))
    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))

    approval_services.decide(approval.pk, user=dana, approve=True, via="chat", shown_hash=approval.shown_hash)

    assert "1 of 2 approvals: dana" in edits_to(fake, ERIN_TG)[-1]["text"]
    assert "Approve" in buttons_on(fake, ERIN_TG, approval)


def test_a_typed_confirmation_below_the_quorum_says_the_vote_is_counted(fake, alice, finance, ops_agent):
    dana, erin = finance
    routemaking.create_route(created_by=None, agent="ops", tool="delete_all_files", approvers=["finance"], quorum=2)
    linked((dana, DANA_TG), (erin, ERIN_TG))
    approval = only_pending(start_conversation(alice, ops_agent, "delete all files"))
    assert approval.confirmation_required

    assert press(fake, DANA_TG, buttons_on(fake, DANA_TG, approval)["Approve (type the confirmation)"]) == "Type the confirmation to approve."
    say(DANA_TG, approval.confirmation_hint)

    assert replies(fake, DANA_TG)[-1] == f"#{approval.pk}: Your approval is counted: 1 of 2."
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_vote_edit_lost_with_its_task_is_made_by_the_sweep(fake, alice, finance, ops_agent, settings):
    dana, erin = finance
    route_email()
    linked((dana, DANA_TG), (erin, ERIN_TG))
    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))
    fake.failing = {"editMessageText"}  # its task and every retry fail: as if it were lost

    approval_services.decide(approval.pk, user=dana, approve=True, via="chat", shown_hash=approval.shown_hash)

    assert not edits_to(fake, ERIN_TG)
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    fake.failing = set()
    delivery_tasks.sweep.delay()

    assert "1 of 2 approvals: dana" in edits_to(fake, ERIN_TG)[-1]["text"]
    assert nothing_lost()


# --- Reminders and escalation ----------------------------------------------------------------------


def test_a_due_reminder_reaches_each_linked_approver_who_has_not_voted_once(fake, alice, finance, ops_agent):
    dana, erin = finance
    route_email(remind_after_seconds=1)
    linked((dana, DANA_TG), (erin, ERIN_TG))
    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))
    approval_services.decide(approval.pk, user=dana, approve=True, via="chat", shown_hash=approval.shown_hash)

    assert escalation.send_due_reminders(now=later()) == [approval.pk]
    assert escalation.send_due_reminders(now=later(10)) == []  # once

    (reminder,) = [m for m in fake.sent("sendMessage", chat_id=ERIN_TG) if m["text"].startswith("⏰ Reminder: still waiting")]
    assert f"#{approval.pk}" in reminder["text"] and "1 of 2 approvals: dana" in reminder["text"]
    request = ApprovalMessage.objects.get(approval=approval, account__user=erin)
    assert reminder["reply_parameters"]["message_id"] == request.message_id
    assert not [text for text in replies(fake, DANA_TG) if "Reminder" in text]  # she voted
    assert list(Reminder.objects.values_list("message__account__user__username", "status")) == [("erin", "sent")]
    CHANNEL.queue_reminders(approval)  # the signal again (a second receiver run): no second row
    assert Reminder.objects.count() == 1


def test_a_reminder_lost_with_its_task_is_sent_by_the_sweep_and_never_after_the_decision(fake, alice, finance, ops_agent, settings):
    dana, erin = finance
    route_email(remind_after_seconds=1)
    linked((dana, DANA_TG), (erin, ERIN_TG))
    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))
    settings.HITL_TELEGRAM_RETRIES = 0
    fake.failing = {"sendMessage"}

    escalation.send_due_reminders(now=later())

    assert set(Reminder.objects.values_list("status", flat=True)) == {"failed"}
    Reminder.objects.update(status="queued", attempts=0)  # as if its task were lost before it ran
    settings.HITL_TELEGRAM_RETRIES = 5
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    fake.failing = set()
    delivery_tasks.sweep.delay()

    assert set(Reminder.objects.values_list("status", flat=True)) == {"sent"}
    assert [text for text in replies(fake, ERIN_TG) if "Reminder" in text]
    assert nothing_lost()

    Reminder.objects.update(status="queued")
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)  # the owner's veto
    (first,) = Reminder.objects.filter(message__account__user=erin)
    assert outbox.send(CHANNEL, Reminder, first.pk) == outbox.Sent.CLOSED


def test_escalation_sends_the_request_to_the_escalation_groups_linked_members_who_may_then_vote(fake, alice, bob, carol, finance, ops_agent):
    dana, erin = finance
    route_email(escalate_after_seconds=1, escalate_to=[APPROVERS_GROUP])
    linked((dana, DANA_TG), (carol, CAROL_TG), (bob, BOB_TG))
    approval = only_pending(start_conversation(alice, ops_agent, EMAIL))
    assert not request_to(fake, CAROL_TG, approval)

    assert escalation.escalate_due(now=later()) == [approval.pk]

    request = request_to(fake, CAROL_TG, approval)
    assert request and "Escalated at" in request["text"] and f"from finance or {APPROVERS_GROUP}" in request["text"]
    assert not request_to(fake, BOB_TG, approval)  # a global approver, not in the escalation group
    assert sorted(ApprovalMessage.objects.filter(approval=approval).values_list("account__user__username", flat=True)) == ["carol", "dana"]
    assert press(fake, CAROL_TG, fake.buttons(request)["Approve"]) == "Your approval is counted: 1 of 2."
    assert Vote.objects.get(approval=approval).user == carol
    escalation.escalate_due(now=later(10))
    assert len([m for m in fake.sent("sendMessage", chat_id=CAROL_TG) if f"(#{approval.pk})" in m["text"]]) == 1
