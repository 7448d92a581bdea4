"""Relaying the agent's answer to the Telegram chat a conversation was written from (chat.elsewhere)."""
import logging
from html import escape

from celery import shared_task

from chat import elsewhere
from chat.models import Conversation

from . import bot
from .models import TelegramAccount
from .updates import CHAT

logger = logging.getLogger(__name__)
MAX_ATTEMPTS = 5


@shared_task(bind=True, ignore_result=True, acks_late=True)
def relay_answer(self, conversation_id: str) -> None:
    """Send the run's answer to its owner's Telegram chat, if they last wrote to it from there.
    A Bot API that is down is tried again, with backoff; an answer that cannot be sent is logged."""
    conversation = Conversation.objects.filter(pk=conversation_id, relay_to=CHAT).first()
    account = TelegramAccount.objects.filter(user_id=conversation.owner_id).first() if conversation else None
    if account is None:
        return  # unlinked, or its owner wrote on the site since (its answer is there)
    said = elsewhere.answer_of(conversation)
    if not said:
        return
    try:
        bot.send(account.chat_id, f"🤖 {escape(said)}")
    except (bot.Forbidden, bot.BadRequest) as exc:  # blocked, or a chat that is gone: trying again changes nothing
        logger.warning("telegram: the answer of %s could not be sent to %s: %r", conversation_id, account.chat_id, exc)
    except Exception as exc:  # the Bot API down, a timeout
        if self.request.retries >= MAX_ATTEMPTS:
            logger.error("telegram: gave up sending the answer of %s: %r", conversation_id, exc)
            return
        raise self.retry(countdown=2 ** self.request.retries, max_retries=MAX_ATTEMPTS) from None
