"""Who gets a Telegram request: an ordinary call only its owner, a four-eyes call only the approvers
other than the requester (one press edits every copy), an inactive user nothing, and nothing is
queued without a bot token."""
import pytest
from django.contrib.auth.models import User

from approvals import services as approval_services
from approvals.models import Approval
from chat import services as chat_services
from deliveries import receivers
from telegramlink.channel import CHANNEL
from telegramlink.models import ApprovalMessage
from tests.conftest import only_pending, start_conversation
from tests.telegramlink.phone import ALICE_TG, BOB_TG, CAROL_TG, MALLORY_TG, edits_to, link, press, request_to, through_the_loop

pytestmark = pytest.mark.django_db


@through_the_loop
def test_an_ordinary_call_goes_only_to_its_owner(fake, alice, bob, mallory, agent):
    link(alice, ALICE_TG)
    link(bob, BOB_TG)
    link(mallory, MALLORY_TG)

    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))

    assert [account.user for account in CHANNEL.recipients(approval)] == [alice]
    assert list(ApprovalMessage.objects.values_list("account__user__username", flat=True)) == ["alice"]
    assert request_to(fake, ALICE_TG, approval)
    assert not request_to(fake, BOB_TG, approval) and not request_to(fake, MALLORY_TG, approval)


@through_the_loop
def test_a_four_eyes_call_goes_only_to_approvers_other_than_the_requester(fake, alice, bob, carol, mallory, ops_agent):
    for user, telegram_id in ((alice, ALICE_TG), (bob, BOB_TG), (carol, CAROL_TG), (mallory, MALLORY_TG)):
        link(user, telegram_id)

    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    assert approval.approver_required
    assert sorted(account.user.username for account in CHANNEL.recipients(approval)) == ["bob", "carol"]
    assert request_to(fake, BOB_TG, approval) and request_to(fake, CAROL_TG, approval)
    assert not request_to(fake, ALICE_TG, approval) and not request_to(fake, MALLORY_TG, approval)

    bobs = only_pending(start_conversation(bob, ops_agent, "delete a.txt"))  # an approver's own call
    assert [account.user.username for account in CHANNEL.recipients(bobs)] == ["carol"]
    assert not request_to(fake, BOB_TG, bobs)


@through_the_loop
def test_a_four_eyes_press_by_one_approver_edits_every_approvers_copy(fake, alice, bob, carol, ops_agent):
    for user, telegram_id in ((alice, ALICE_TG), (bob, BOB_TG), (carol, CAROL_TG)):
        link(user, telegram_id)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))

    assert press(fake, BOB_TG, fake.buttons(request_to(fake, BOB_TG, approval))["Approve"]) == "Approved."

    assert "Approved by bob via telegram" in edits_to(fake, CAROL_TG)[-1]["text"]
    assert "Approved by bob via telegram" in edits_to(fake, BOB_TG)[-1]["text"]
    assert set(ApprovalMessage.objects.filter(approval=approval).values_list("status", flat=True)) == {"closed"}


@through_the_loop
def test_an_inactive_user_gets_nothing(fake, alice, bob, carol, ops_agent):
    link(alice, ALICE_TG)
    link(bob, BOB_TG)
    link(carol, CAROL_TG)
    User.objects.filter(pk__in=[alice.pk, carol.pk]).update(is_active=False)

    conversation = chat_services.start_conversation(user=alice, agent=ops_agent, content="delete a.txt")
    approval = only_pending(conversation)

    assert [account.user.username for account in CHANNEL.recipients(approval)] == ["bob"]
    own = Approval(requested_by=alice, approver_required=False)
    assert CHANNEL.recipients(own) == []
    assert not request_to(fake, CAROL_TG, approval)
    assert list(ApprovalMessage.objects.values_list("account__user__username", flat=True)) == ["bob"]


@through_the_loop
def test_nothing_is_queued_without_a_bot_token(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    settings.TELEGRAM_BOT_TOKEN = ""
    calls_before = len(fake.calls)

    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))

    assert not ApprovalMessage.objects.exists()
    assert not CHANNEL.enabled()
    receivers.on_approval_requested(Approval, approval)  # the request's signal again: the channel is off
    assert not ApprovalMessage.objects.exists()
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    assert len(fake.calls) == calls_before
