"""Writes the pages and the API make: start a conversation, post a message, retry, resume."""
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.models import Approval
from approvals.services import decide_all
from approvals.text import Intent, parse_decision
from hitl.celery import enqueue_on_commit

from . import loop
from .models import Agent, Conversation, Message
from .tasks import advance_conversation


class InvalidMessage(ValueError):
    pass


class NotOwner(PermissionError):
    pass


def start_conversation(*, user, agent: Agent, content: str) -> Conversation:
    content = _clean(content)
    with transaction.atomic():
        conversation = Conversation.objects.create(owner=user, agent=agent, title=content[:80])
        post_message(conversation=conversation, user=user, content=content)
    return conversation


def post_message(*, conversation: Conversation, user, content: str) -> Message:
    """Store what the owner typed and set the loop going, or, while calls wait for approval, read
    it as a decision (a clear yes or no), ask for a clearer one, or hold it until they are decided."""
    content = _clean(content)
    if conversation.owner_id != user.pk:
        raise NotOwner("Only the conversation's owner can write in it.")
    with transaction.atomic():
        loop.lock_conversation(conversation)
        # Pending approvals, not the status, say whether a reply decides: the status turns to
        # waiting a moment after the calls are stored, and a fast client can answer in between.
        if Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).exists():
            return _post_while_waiting(conversation, user, content)
        message = loop.append_message(conversation, role=Message.Role.USER, content=content, author=user)
        _set_running(conversation)
    return message


def _post_while_waiting(conversation: Conversation, user, content: str) -> Message:
    decision = parse_decision(content)
    pending = Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).count()
    if decision.intent in (Intent.APPROVE, Intent.REJECT):
        message = loop.append_message(
            conversation, role=Message.Role.USER, content=content, author=user, in_model_context=False
        )
        decided = decide_all(
            conversation_id=conversation.pk,
            user=user,
            via=Approval.Via.TEXT,
            approve=decision.intent == Intent.APPROVE,
            reason=decision.reason,
        )
        if len(decided) < pending:
            loop.add_notice(conversation, f"{pending - len(decided)} call(s) still wait for an approver.")
        return message
    if decision.intent == Intent.AMBIGUOUS:
        message = loop.append_message(
            conversation, role=Message.Role.USER, content=content, author=user, in_model_context=False
        )
        loop.add_notice(
            conversation,
            f"That is not a clear yes or no for all {pending} pending call(s), so nothing was decided. "
            "Decide each call on its card, or answer \"yes\" or \"no, because …\" for all of them.",
        )
        return message
    message = loop.append_message(conversation, role=Message.Role.USER, content=content, author=user)
    loop.add_notice(conversation, "Your message will be answered once the pending calls are decided.")
    return message


def retry(*, conversation: Conversation, user) -> None:
    if conversation.owner_id != user.pk:
        raise NotOwner("Only the conversation's owner can retry it.")
    with transaction.atomic():
        updated = Conversation.objects.filter(pk=conversation.pk, status=Conversation.Status.FAILED).update(
            status=Conversation.Status.RUNNING, error="", updated_at=timezone.now()
        )
        if updated:
            conversation.status, conversation.error = Conversation.Status.RUNNING, ""
            loop.push_status(conversation)
            enqueue_on_commit(advance_conversation, str(conversation.pk))


def _set_running(conversation: Conversation) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.Status.RUNNING, error="", updated_at=timezone.now()
    )
    conversation.status, conversation.error = Conversation.Status.RUNNING, ""
    loop.push_status(conversation)
    enqueue_on_commit(advance_conversation, str(conversation.pk))


def _clean(content: str) -> str:
    content = (content or "").strip()
    if not content:
        raise InvalidMessage("The message is empty.")
    if "\x00" in content:  # PostgreSQL cannot store it; no one types it
        raise InvalidMessage("The message contains a NUL character.")
    if len(content) > settings.HITL_MAX_MESSAGE_CHARS:
        raise InvalidMessage(f"The message is longer than {settings.HITL_MAX_MESSAGE_CHARS} characters.")
    return content
