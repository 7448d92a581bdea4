"""Relaying the agent's answer to the Slack channel a conversation was written from (chat.elsewhere)."""
import logging

from celery import shared_task

from chat import elsewhere
from chat.models import Conversation

from . import client
from .events import CHAT, escape
from .models import SlackChat

logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 5


@shared_task(bind=True, ignore_result=True, acks_late=True)
def relay_answer(self, conversation_id: str) -> None:
    """Post the run's answer where its owner last wrote to it from in Slack, if they did last write
    from Slack. Slack down is tried again, with backoff; a refusal (a channel the app left) is logged."""
    conversation = Conversation.objects.filter(pk=conversation_id, relay_to=CHAT).first()
    chat = (
        SlackChat.objects.filter(conversation_id=conversation_id, account__user_id=conversation.owner_id).order_by("-updated_at").first()
        if conversation else None
    )
    if chat is None:
        return
    said = elsewhere.answer_of(conversation)
    if not said:
        return
    try:
        client.post(chat.channel, f"🤖 {escape(said)}", [])
    except Exception as exc:
        if client.is_permanent(exc) or self.request.retries >= MAX_ATTEMPTS:
            logger.error("slack: the answer of %s could not be posted to %s: %r", conversation_id, chat.channel, exc)
            return
        raise self.retry(countdown=2 ** self.request.retries, max_retries=MAX_ATTEMPTS) from None
