"""Who gets a Slack request, and every copy following: a four-eyes call goes only to eligible
approvers and one press updates every copy, an edit rewrites every copy, a vote below the quorum is
counted on each, reminders reply once under each request, and nothing is sent without Slack."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals.deciders import escalation, routemaking
from approvals import services as approval_services
from approvals.models import Approval
from approvals.signals import approval_requested
from deliveries import outbox
from slacklink.channel import CHANNEL
from slacklink.models import Reminder, SlackMessage
from tests.conftest import only_pending, start_conversation
from tests.slacklink.workspace import ALICE, BOB, CAROL, DANA, ERIN, MALLORY, link, request_to, sweep, through_the_loop

pytestmark = pytest.mark.django_db


@through_the_loop
def test_a_four_eyes_call_goes_only_to_eligible_approvers_and_one_press_updates_every_copy(fake, alice, bob, carol, mallory, ops_agent):
    for user, slack_id in ((alice, ALICE), (bob, BOB), (carol, CAROL), (mallory, MALLORY)):
        link(fake, user, slack_id)

    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))

    assert approval.approver_required
    assert sorted(a.user.username for a in CHANNEL.recipients(approval)) == ["bob", "carol"]
    assert not request_to(fake, ALICE, approval) and not request_to(fake, MALLORY, approval)
    fake.press(BOB, request_to(fake, BOB, approval), "Approve")
    for slack_id in (BOB, CAROL):
        assert "Approved by bob via slack" in fake.text_of(request_to(fake, slack_id, approval))
        assert fake.buttons(request_to(fake, slack_id, approval)) == {}
    assert set(SlackMessage.objects.filter(approval=approval).values_list("status", flat=True)) == {"closed"}


@through_the_loop
def test_an_edit_after_sending_rewrites_every_copy_and_the_old_buttons_decide_nothing(fake, alice, bob, carol, ops_agent):
    link(fake, bob, BOB)
    link(fake, carol, CAROL)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    before = request_to(fake, CAROL, approval)

    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="chat", shown_hash=approval.shown_hash)

    after = request_to(fake, CAROL, approval)
    assert "b.txt" in fake.text_of(after) and before["ts"] == after["ts"]
    bobs = request_to(fake, BOB, approval)  # bob edited it: four eyes, he may no longer approve it
    assert "now decided by others" in fake.text_of(bobs) and list(fake.buttons(bobs)) == ["Open on the site"]
    fake.press(CAROL, before, "Approve")  # the button as it was before the edit
    assert fake.ephemerals(CAROL)[-1].startswith("The call was edited after this message")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    fake.press(CAROL, after, "Approve")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approved_arguments) == ("approved", carol, {"path": "b.txt"})
    assert "Approved by carol via slack" in fake.text_of(request_to(fake, BOB, approval))


@through_the_loop
def test_a_vote_below_quorum_is_counted_on_every_copy_which_keeps_its_buttons(fake, alice, ops_agent):
    group = Group.objects.create(name="finance")
    dana, erin = (User.objects.create_user(name) for name in ("dana", "erin"))
    for member in (dana, erin):
        member.groups.add(group)
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)
    link(fake, dana, DANA)
    link(fake, erin, ERIN)
    approval = only_pending(start_conversation(alice, ops_agent, "email bob@example.com about lunch"))
    assert "0 of 2 approvals" in fake.text_of(request_to(fake, ERIN, approval))

    fake.press(DANA, request_to(fake, DANA, approval), "Approve")

    assert fake.ephemerals(DANA)[-1] == "Your approval is counted: 1 of 2 approvals: dana."
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    erins = request_to(fake, ERIN, approval)
    assert "1 of 2 approvals: dana" in fake.text_of(erins) and "Approve" in fake.buttons(erins)
    fake.press(ERIN, erins, "Approve")
    assert Approval.objects.get(pk=approval.pk).status == "approved"
    assert "Approved by erin via slack" in fake.text_of(request_to(fake, DANA, approval))


@through_the_loop
def test_a_due_reminder_replies_once_under_the_request_of_each_approver_who_has_not_voted(fake, alice, ops_agent, settings):
    group = Group.objects.create(name="finance")
    dana, erin = (User.objects.create_user(name) for name in ("dana", "erin"))
    for member in (dana, erin):
        member.groups.add(group)
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2, remind_after_seconds=1)
    link(fake, dana, DANA)
    link(fake, erin, ERIN)
    approval = only_pending(start_conversation(alice, ops_agent, "email bob@example.com about lunch"))
    fake.press(DANA, request_to(fake, DANA, approval), "Approve")

    assert escalation.send_due_reminders(now=timezone.now() + timedelta(seconds=5)) == [approval.pk]

    (reminder,) = fake.replies_to(ERIN)
    assert reminder["thread_ts"] == request_to(fake, ERIN, approval)["ts"]
    assert reminder["text"].startswith(f"⏰ Reminder: still waiting for a decision on #{approval.pk}")
    assert "1 of 2 approvals: dana" in reminder["text"] and not fake.replies_to(DANA)  # dana voted
    assert CHANNEL.queue_reminders(approval) == []  # the signal again: no second reminder
    sweep()
    assert len(fake.replies_to(ERIN)) == 1


@through_the_loop
def test_a_reminder_lost_with_its_task_is_sent_by_the_sweep_and_never_after_the_decision(fake, alice, ops_agent, settings):
    group = Group.objects.create(name="finance")
    dana = User.objects.create_user("dana")
    dana.groups.add(group)
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=1)
    link(fake, dana, DANA)
    approval = only_pending(start_conversation(alice, ops_agent, "email bob@example.com about lunch"))
    ((_, lost),) = CHANNEL.queue_reminders(approval)  # queued, its task lost

    sweep()

    assert Reminder.objects.get(pk=lost).status == "sent" and len(fake.replies_to(DANA)) == 1
    Reminder.objects.filter(pk=lost).update(status="queued")  # as if queued again before the decision
    fake.press(DANA, request_to(fake, DANA, approval), "Approve")
    assert outbox.send(CHANNEL, Reminder, lost) == outbox.Sent.CLOSED and len(fake.replies_to(DANA)) == 1


@through_the_loop
def test_nothing_is_sent_without_slack_set_up(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    settings.SLACK_BOT_TOKEN = ""
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    approval_requested.send(sender=Approval, approval=approval)  # asked again (a reminder, an escalation)
    assert not CHANNEL.enabled() and not SlackMessage.objects.exists()
