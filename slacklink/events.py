"""Slack's Events API: a linked person's direct message to the app, or a mention of it in a
channel, is the next line of their conversation with the agent (chat.elsewhere), whose answer comes
back to that channel once the run ends (tasks.relay_answer). `new` starts a new conversation. The
calls it asks for are requested in the person's direct messages with the app, as every request is
(never in a channel, whose members may not decide them), and decided by their buttons: a typed yes
or no decides nothing here. A bot's message, an edit or a join is no one writing, and is ignored."""
import logging
import re

from django.conf import settings
from django.db import transaction

from approvals.text import Intent, parse_decision
from chat import elsewhere

from . import accounts, client
from .models import SlackChat

logger = logging.getLogger(__name__)
CHAT = "slack"  # Conversation.relay_to of the conversations written from Slack
MENTION = re.compile(r"^\s*<@[A-Z0-9]+>\s*")
NEW = {"new", "/new"}
NOT_LINKED = "This Slack account is not linked: send /hitl link <code> with the code from your profile page on the site."


def handle(team_id: str, event: dict) -> None:
    """One event, as Slack delivered it (signed, new: the view checked)."""
    kind, user, channel, text = event.get("type"), event.get("user"), event.get("channel"), event.get("text")
    if kind not in ("message", "app_mention") or event.get("bot_id") or event.get("subtype"):
        return
    if kind == "message" and event.get("channel_type") != "im":
        return  # a channel's talk: the app answers only when mentioned there
    if not all(isinstance(value, str) and value for value in (user, channel)) or not isinstance(text, str):
        return
    account = accounts.account_of(team_id, user)
    if account is None:
        return client.tell(channel, user, NOT_LINKED) if kind == "app_mention" else _say(channel, NOT_LINKED)
    text = MENTION.sub("", text).strip()
    chat, _ = SlackChat.objects.get_or_create(account=account, channel=channel)
    if text.lower() in NEW:
        SlackChat.objects.filter(pk=chat.pk).update(conversation=None)
        return _say(channel, "Your next message starts a new conversation.")
    if not text:
        return _say(channel, "Write what your agent should do; `new` starts a new conversation.")
    if parse_decision(text).intent != Intent.NONE:
        return _say(channel, "Decide with the buttons on a request: a typed yes or no decides nothing here. "
                             "Anything else you write goes to your agent.")
    try:
        with transaction.atomic():  # the chat names its conversation before the run can start (on commit), and end
            conversation = elsewhere.say(account.user, chat.conversation, text, relay_to=CHAT)
            SlackChat.objects.filter(pk=chat.pk).update(conversation=conversation)
    except elsewhere.Refused as exc:
        return _say(channel, str(exc))
    if conversation.pk != chat.conversation_id:
        link = f"<{settings.HITL_BASE_URL}/conversations/{conversation.pk}/|open it on the site>"
        _say(channel, f"A new conversation with {escape(conversation.agent.name)}: {link}. `new` starts another.", escaped=True)


def escape(text: str) -> str:
    """Text read as mrkdwn: the three characters Slack asks to escape."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _say(channel: str, text: str, *, escaped: bool = False) -> None:
    try:
        client.post(channel, text if escaped else escape(text), [])
    except Exception as exc:  # best effort: the event is handled, what it did is on the site
        logger.warning("slack: could not answer in %s: %r", channel, exc)
