"""The Slack outbox (the deliveries outbox): a failed send stays queued and the sweep sends it again,
one Slack refuses for good fails at once, the retries run out, a decision while Slack is down updates
the message later, and a message decided before it was sent is closed unsent; the stand-in refuses
what Slack refuses, and a wrong bot token keeps the message queued."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from deliveries import outbox
from slacklink.channel import CHANNEL
from slacklink.models import SlackMessage
from tests.slacklink.workspace import ALICE, link, queued_unsent, request_to, send, sweep, through_the_loop

pytestmark = pytest.mark.django_db


def stale_rows(settings) -> tuple[list, list[int], list[int]]:
    """(rows to send again, messages to close again, to rewrite again), as the sweep finds them once stale."""
    settings.HITL_SLACK_STALE_SECONDS = 0
    found = outbox.lost(CHANNEL, now=timezone.now() + timedelta(seconds=1))
    return found.to_send, found.to_close, found.to_rewrite


@through_the_loop
def test_a_failed_send_stays_queued_and_the_sweep_sends_it_again_once(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"chat.postMessage"}

    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.attempts, row.ts) == ("queued", 1, "")
    assert "service_unavailable" in row.last_error or "503" in row.last_error
    assert stale_rows(settings) == ([(SlackMessage, row.pk)], [], [])
    fake.failing = set()
    sweep()
    row.refresh_from_db()
    assert (row.status, row.last_error) == ("sent", "") and request_to(fake, ALICE, approval)
    sweep()
    assert len(fake.sent("chat.postMessage", channel=ALICE)) == 1


@through_the_loop
def test_a_send_slack_refuses_for_good_is_failed_at_once_and_shown_to_operators(fake, alice, agent, settings, admin_client):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.refusing = {"chat.postMessage": "channel_not_found"}

    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.last_error) == ("failed", "channel_not_found")
    assert stale_rows(settings) == ([], [], [])
    page = admin_client.get("/admin/slacklink/slackmessage/?status__exact=failed")
    assert page.status_code == 200 and "channel_not_found" in page.content.decode()


@through_the_loop
def test_a_send_that_keeps_failing_gives_up_after_the_retries(fake, alice, agent, settings):
    settings.HITL_SLACK_RETRIES = 1
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"chat.postMessage"}
    assert send(row) == send(row) == outbox.Sent.FAILED
    assert send(row) == outbox.Sent.NOT_CLAIMED
    assert SlackMessage.objects.get(pk=row.pk).status == "failed"


@through_the_loop
def test_a_decision_while_slack_is_down_is_made_and_the_sweep_updates_the_message_later(pending, fake, alice, settings):
    approval, message = pending
    fake.failing = {"chat.update"}

    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)

    assert Approval.objects.get(pk=approval.pk).status == "approved"
    row = SlackMessage.objects.get(approval=approval)
    assert row.status == "sent" and row.last_error
    assert stale_rows(settings) == ([], [row.pk], [])
    fake.failing = set()
    sweep()
    assert SlackMessage.objects.get(pk=row.pk).status == "closed"
    assert "Approved by alice via chat" in fake.text_of(request_to(fake, ALICE, approval))


@through_the_loop
def test_a_message_decided_before_it_was_sent_is_closed_unsent(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    assert SlackMessage.objects.get(pk=row.pk).status == "closed"
    assert send(row) == outbox.Sent.NOT_CLAIMED
    assert not fake.sent("chat.postMessage")


@through_the_loop
def test_a_press_on_a_copy_whose_send_was_never_recorded_records_it_and_updates_it(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.lost_answers = {"chat.postMessage"}
    assert send(row) == outbox.Sent.FAILED
    fake.lost_answers = set()
    delivered = request_to(fake, ALICE, approval)

    fake.press(ALICE, delivered, "Approve")

    row.refresh_from_db()
    assert (row.status, row.ts) == ("closed", delivered["ts"])
    assert "Approved by alice via slack" in fake.text_of(request_to(fake, ALICE, approval))


def test_the_stand_in_refuses_what_slack_refuses(fake, settings):
    from slack_sdk.errors import SlackApiError

    from slacklink import client

    too_long = [{"type": "section", "text": {"type": "plain_text", "text": "x" * 3001}}]
    with pytest.raises(SlackApiError) as refused:
        client.post(ALICE, "hello", too_long)
    assert client.error_code(refused.value) == "invalid_blocks" and client.is_permanent(refused.value)
    with pytest.raises(SlackApiError) as refused:
        client.open_view("never-issued", {"type": "modal", "blocks": []})
    assert client.error_code(refused.value) == "invalid_trigger_id"
    settings.SLACK_BOT_TOKEN = "xoxb-wrong"
    with pytest.raises(SlackApiError) as refused:
        client.post(ALICE, "hello", [])
    assert client.error_code(refused.value) == "invalid_auth" and not client.is_permanent(refused.value)
    assert not fake.calls


@through_the_loop
def test_a_wrong_bot_token_keeps_the_message_queued_with_slacks_error_until_it_is_fixed(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    token, settings.SLACK_BOT_TOKEN = settings.SLACK_BOT_TOKEN, "xoxb-revoked"

    assert send(row) == outbox.Sent.FAILED
    assert SlackMessage.objects.get(pk=row.pk).last_error == "invalid_auth"

    settings.SLACK_BOT_TOKEN = token
    sweep()
    assert SlackMessage.objects.get(pk=row.pk).status == "sent" and request_to(fake, ALICE, approval)
