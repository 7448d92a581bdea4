"""Chat from Slack (issue 39, item 4): a linked person's direct message to the app, or a mention of
it in a channel, starts or continues a conversation with their default agent; the answer is posted
back where they wrote; its gated calls are requested in their direct messages and a press runs them;
`new` starts a new conversation. Events are signed, handled once, and a bot's own message is no one's."""
import json

from approvals.models import Approval
from chat.models import Conversation, Message
from slacklink.models import SlackChat
from tests.slacklink.workspace import ALICE, STRANGER, link, request_to, through_the_loop
from tests.standins.fake_slack import dm, sign

pytestmark = through_the_loop


def answers(fake, channel: str) -> list[str]:
    return [body["text"] for body in fake.said_in(channel) if body["text"].startswith("🤖")]


def test_a_direct_message_starts_a_conversation_and_its_answer_comes_back(fake, alice, agent):
    link(fake, alice, ALICE)

    status, _ = fake.message(ALICE, "what is (2 + 3) * 4")

    assert status == 200
    chat = SlackChat.objects.get(account__user=alice, channel=dm(ALICE))
    assert (chat.conversation.owner, chat.conversation.agent, chat.conversation.relay_to) == (alice, agent, "slack")
    texts = [body["text"] for body in fake.said_in(dm(ALICE))]
    assert any(text.startswith("A new conversation with Demo agent: <http") for text in texts)
    assert answers(fake, dm(ALICE)) == ["🤖 I did calculate (2 + 3) * 4: (2 + 3) * 4 = 20"]

    fake.message(ALICE, "list files")  # the same conversation
    assert Conversation.objects.filter(owner=alice).count() == 1
    assert len(answers(fake, dm(ALICE))) == 2


def test_a_mention_in_a_channel_is_answered_there_and_its_call_is_requested_in_the_direct_messages(fake, alice, agent, settings):
    link(fake, alice, ALICE)

    fake.message(ALICE, "write hello to s.txt", channel="C0TEAM", mention=True)

    chat = SlackChat.objects.get(account__user=alice, channel="C0TEAM")
    approval = Approval.objects.get(conversation=chat.conversation)
    request = request_to(fake, ALICE, approval)
    assert request is not None and request["channel"] == dm(ALICE)  # never in the channel
    fake.message(ALICE, "yes", channel="C0TEAM", mention=True)
    assert fake.said_in("C0TEAM")[-1]["text"].startswith("Decide with the buttons on a request")
    approval.refresh_from_db()
    assert approval.status == "pending"

    status, _ = fake.press(ALICE, request, "Approve")

    assert status == 200
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "slack")
    assert (settings.HITL_SANDBOX_ROOT / str(chat.conversation_id) / "s.txt").read_text() == "hello"
    assert answers(fake, "C0TEAM") == ["🤖 I did write s.txt: Wrote 5 bytes to s.txt."]
    assert answers(fake, dm(ALICE)) == []


def test_new_starts_a_new_conversation(fake, alice, agent):
    link(fake, alice, ALICE)
    fake.message(ALICE, "list files")
    first = SlackChat.objects.get(account__user=alice).conversation

    fake.message(ALICE, "new")
    assert fake.said_in(dm(ALICE))[-1]["text"] == "Your next message starts a new conversation."
    fake.message(ALICE, "list files")

    assert SlackChat.objects.get(account__user=alice).conversation not in (None, first)


def test_someone_not_linked_is_told_how_to_link_and_nothing_starts(fake, alice, agent):
    fake.message(STRANGER, "list files")
    assert fake.said_in(dm(STRANGER))[-1]["text"].startswith("This Slack account is not linked")
    assert not Conversation.objects.exists()


def test_a_bots_own_message_an_edit_and_a_channel_message_without_a_mention_are_nobody_writing(fake, alice, agent):
    link(fake, alice, ALICE)
    fake.message(ALICE, "list files", extra={"bot_id": "B0HITL"})
    fake.message(ALICE, "list files", extra={"subtype": "message_changed"})
    fake.message(ALICE, "list files", extra={"channel": "C0TEAM", "channel_type": "channel"})
    assert not Conversation.objects.exists() and fake.said_in(dm(ALICE)) == []


def test_an_event_is_handled_once_and_the_url_check_is_answered(fake, alice, agent):
    link(fake, alice, ALICE)
    event = {"type": "message", "user": ALICE, "text": "list files", "channel": dm(ALICE), "channel_type": "im", "ts": "1.1"}

    fake.event(event, event_id="Ev1")
    fake.event(event, event_id="Ev1")  # Slack's retry of it

    assert Message.objects.filter(role="user").count() == 1
    body = json.dumps({"type": "url_verification", "challenge": "abc123", "token": "deprecated"})
    status, text = fake.deliver("/slack/events/", body, headers=sign(fake.signing_secret, body) | {"Content-Type": "application/json"})
    assert (status, json.loads(text)) == (200, {"challenge": "abc123"})


def test_an_unsigned_event_is_refused(fake, alice, agent):
    link(fake, alice, ALICE)
    body = json.dumps({"type": "event_callback", "event_id": "Ev9", "team_id": "T0HITL",
                       "event": {"type": "message", "user": ALICE, "text": "list files", "channel": dm(ALICE), "channel_type": "im"}})
    status, _ = fake.deliver("/slack/events/", body, headers={"Content-Type": "application/json", "X-Slack-Request-Timestamp": "1",
                                                              "X-Slack-Signature": "v0=00"})
    assert status == 401 or status == 403
    assert not Conversation.objects.exists()
