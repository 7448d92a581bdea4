"""Chat from another place (the TypeScript design's "the chat the prompt came from"): a linked
person's message to the Telegram bot, or to the Slack app, starts or continues a conversation with
their default agent, and the agent's answer goes back to that chat once the run ends
(chat.signals.run_settled, which the channel app listens to). Its gated calls are requested where
every call is (their owner's linked chats among them), and decided there by their buttons, never by
a typed "yes" sent from elsewhere: the chat that sent it may not have shown the call whole."""
from approvals.models import Approval

from . import quotas, services
from .models import Agent, Conversation, Message
from .selectors import may_use, usable_agents

MAX_ANSWER_CHARS = 3500  # an answer relayed to a chat: the rest is on the site


class Refused(Exception):
    """What the chat is told instead: the message was not posted (why, in words)."""


def default_agent(user) -> Agent | None:
    """The agent a message from elsewhere talks to: that of the user's newest conversation in the
    chat app, if they may still use it, else the first agent they may use (by name)."""
    latest = (
        Conversation.objects.filter(owner=user, source=Conversation.Source.CHAT).select_related("agent").order_by("-created_at").first()
    )
    if latest is not None and may_use(user, latest.agent):
        return latest.agent
    return usable_agents(user).order_by("name", "pk").first()


def say(user, conversation: Conversation | None, text: str, *, relay_to: str) -> Conversation:
    """Post `text` from the chat `relay_to` as `user`: in `conversation` if it is theirs and still
    theirs to use, else in a new conversation with their default agent. Raises Refused (calls wait
    there: decide them first; no agent; a message the chat app refuses)."""
    try:
        if conversation is not None and _continues(user, conversation):
            if Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).exists():
                raise Refused("Calls wait for your decision in this conversation: decide them with the buttons on their "
                              "requests, or on the site, then write again. Nothing was sent.")
            # shown={}: this chat showed no call, so the message decides none (chat.services.post_message).
            services.post_message(conversation=conversation, user=user, content=text, shown={}, relay_to=relay_to)
            return conversation
        agent = default_agent(user)
        if agent is None:
            raise Refused("You may not use any agent yet: ask an admin for one.")
        return services.start_conversation(user=user, agent=agent, content=text, relay_to=relay_to)
    except (services.InvalidMessage, services.UnknownAgent, services.NotOwner, quotas.QuotaExceeded) as exc:
        raise Refused(str(exc)) from None


def _continues(user, conversation: Conversation) -> bool:
    return conversation.owner_id == user.pk and not conversation.is_outside and may_use(user, conversation.agent)


def answer_of(conversation: Conversation) -> str:
    """What the agent said since its owner last wrote: its last words (cut to MAX_ANSWER_CHARS), or
    why the run failed; "" when it said nothing."""
    conversation.refresh_from_db(fields=["status", "error"])
    if conversation.status == Conversation.Status.FAILED:
        return f"The run failed: {conversation.error}"
    since = conversation.messages.filter(role=Message.Role.USER).order_by("-position").values_list("position", flat=True).first() or 0
    said = (
        conversation.messages.filter(role=Message.Role.ASSISTANT, position__gt=since).exclude(content="")
        .order_by("-position").values_list("content", flat=True).first()
    )
    if not said:
        return ""
    return said if len(said) <= MAX_ANSWER_CHARS else said[:MAX_ANSWER_CHARS] + " … (cut: the rest is on the site)"
