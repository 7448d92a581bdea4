"""Chat from Telegram (issue 39, item 4; the TypeScript design's "the chat the prompt came from"): a
linked person's message to the bot starts or continues a conversation with their default agent,
the answer comes back to that chat, its gated calls are requested there and a press runs them;
/new starts a new conversation. A typed "yes" from the chat never decides a call."""
import pytest

from approvals.models import Approval
from chat.models import Conversation, Message
from telegramlink.models import TelegramAccount
from tests.conftest import start_conversation
from tests.telegramlink.phone import ALICE_TG, link, press, replies, request_to, say, through_the_loop

pytestmark = through_the_loop


def answers(fake) -> list[str]:
    return [text for text in replies(fake, ALICE_TG) if text.startswith("🤖")]


def test_a_message_to_the_bot_starts_a_conversation_and_its_answer_comes_back(fake, alice, agent):
    link(alice, ALICE_TG)

    say(ALICE_TG, "what is (2 + 3) * 4")

    account = TelegramAccount.objects.get(user=alice)
    conversation = account.conversation
    assert (conversation.owner, conversation.agent, conversation.relay_to) == (alice, agent, "telegram")
    assert conversation.messages.filter(role=Message.Role.USER).get().content == "what is (2 + 3) * 4"
    assert any(text.startswith("A new conversation with Demo agent: <a href=") for text in replies(fake, ALICE_TG))
    assert answers(fake) == ["🤖 " + conversation.messages.filter(role="assistant").exclude(content="").last().content]
    assert "20" in answers(fake)[0]

    say(ALICE_TG, "list files")  # goes on in the same conversation

    assert Conversation.objects.filter(owner=alice).count() == 1
    assert conversation.messages.filter(role=Message.Role.USER).count() == 2
    assert len(answers(fake)) == 2


def test_its_gated_call_is_requested_in_that_chat_and_a_press_runs_it_and_the_answer_arrives(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    say(ALICE_TG, "write hello to a.txt")
    conversation = TelegramAccount.objects.get(user=alice).conversation
    approval = Approval.objects.get(conversation=conversation)
    request = request_to(fake, ALICE_TG, approval)
    assert request is not None and answers(fake) == []  # nothing said yet: the call waits

    say(ALICE_TG, "yes")  # a typed yes from the chat decides nothing: it may not have shown the call whole
    assert replies(fake, ALICE_TG)[-1].startswith("Decide with the buttons on a request: a typed yes or no decides nothing here.")
    say(ALICE_TG, "and then read it")  # nor does anything else, nor is it posted while the call waits
    assert "Calls wait for your decision in this conversation" in replies(fake, ALICE_TG)[-1]
    approval.refresh_from_db()
    assert approval.status == "pending" and conversation.messages.filter(role=Message.Role.USER).count() == 1

    assert press(fake, ALICE_TG, fake.buttons(request)["Approve"]) == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "telegram")
    assert (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "a.txt").read_text() == "hello"
    assert answers(fake) == ["🤖 I did write a.txt: Wrote 5 bytes to a.txt."]


def test_new_starts_a_new_conversation(fake, alice, agent):
    link(alice, ALICE_TG)
    say(ALICE_TG, "list files")
    first = TelegramAccount.objects.get(user=alice).conversation

    say(ALICE_TG, "/new")
    assert replies(fake, ALICE_TG)[-1] == "Your next message starts a new conversation."
    assert TelegramAccount.objects.get(user=alice).conversation is None
    say(ALICE_TG, "list files")

    second = TelegramAccount.objects.get(user=alice).conversation
    assert second is not None and second != first
    assert Conversation.objects.filter(owner=alice).count() == 2


def test_a_conversation_on_the_site_is_not_relayed(fake, alice, agent):
    link(alice, ALICE_TG)
    start_conversation(alice, agent, "list files")
    assert answers(fake) == []


def test_without_an_agent_to_use_nothing_starts_and_the_chat_is_told(fake, alice, agent):
    agent.open_to_everyone = False
    agent.save()
    agent.allowed_users.clear()
    link(alice, ALICE_TG)

    say(ALICE_TG, "list files")

    assert replies(fake, ALICE_TG)[-1] == "You may not use any agent yet: ask an admin for one."
    assert not Conversation.objects.filter(owner=alice).exists()


def test_an_unknown_command_says_what_the_bot_does(fake, alice, agent):
    link(alice, ALICE_TG)
    say(ALICE_TG, "/help")
    assert replies(fake, ALICE_TG)[-1].startswith("Commands: /new starts a new conversation")
    assert not Conversation.objects.filter(owner=alice).exists()
