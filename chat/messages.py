"""Storing messages: each at the next position under the conversation's lock, pushed on commit;
and the small helpers every writer of a conversation shares (its lock, its status bar)."""
from django.db import transaction
from django.db.models import Max, Prefetch, prefetch_related_objects

from approvals.models import Rule
from core import live

from . import fragments
from .models import Conversation, Message, ToolCall


def push_status(conversation: Conversation) -> None:
    """Show every open tab the conversation's status (working, waiting, failed with Retry) on commit."""
    live.push(live.conversation_group(conversation.pk), fragments.conversation_status_html(conversation))


def lock_conversation(conversation: Conversation) -> None:
    # A row lock on PostgreSQL; on SQLite the IMMEDIATE transaction already holds the write lock.
    Conversation.objects.select_for_update().filter(pk=conversation.pk).exists()


def add_notice(conversation: Conversation, text: str, *, locked: bool = False) -> Message:
    return append_message(conversation, role=Message.Role.SYSTEM, content=text, in_model_context=False, locked=locked)


def append_message(
    conversation: Conversation, *, role: str, content: str, push: bool = True, locked: bool = False, **fields
) -> Message:
    """Store a message at the next position, under the conversation's lock, and push it on commit.
    `locked`: the caller's transaction holds the lock already. No savepoint: a failure here ends
    the caller's transaction, as it would have anyway."""
    with transaction.atomic(savepoint=False):
        if not locked:
            lock_conversation(conversation)
        last = conversation.messages.aggregate(last=Max("position"))["last"]
        message = Message.objects.create(
            conversation=conversation, position=(last or 0) + 1, role=role, content=content, **fields
        )
        set_loaded_calls(message, [])
        if push:
            live.push(live.conversation_group(conversation.pk), lambda: fragments.message_html(message, oob=True))
    return message


def load_calls(message: Message) -> None:
    """Load a turn's calls with their approvals, each call's `message` being the turn: a card (and
    its turn's "Approve all") renders from memory, and a status changed on a call is the status
    every later render of the turn sees. What only some cards show (a rule, a repeated call's
    first rejection) is read only when one of them is there."""
    calls = list(message.tool_calls.select_related("approval__decided_by", "approval__claimed_by"))
    approvals = [approval for call in calls if (approval := getattr(call, "approval", None)) is not None]
    if by_rule := [approval for approval in approvals if approval.rule_id]:
        prefetch_related_objects(by_rule, "rule")
    if repeats := [approval for approval in approvals if approval.repeat_of_id]:
        prefetch_related_objects(repeats, "repeat_of__decided_by")
    if remembered := [approval for approval in approvals if approval.remembered]:  # "Always": the rule, to undo
        prefetch_related_objects(remembered, Prefetch("rules_made", queryset=Rule.objects.filter(deleted_at__isnull=True), to_attr="live_rules_made"))
    if undoable := [call for call in calls if call.undo_until is not None]:  # their Undo lines (chat.undo)
        prefetch_related_objects(undoable, "undos")
    set_loaded_calls(message, calls)


def set_loaded_calls(message: Message, calls: list[ToolCall]) -> None:
    """Make `message.tool_calls.all()` these calls, as if prefetched: no query to read them again."""
    loaded = message.tool_calls.all()
    loaded._result_cache, loaded._prefetch_done = calls, True
    message._prefetched_objects_cache = {"tool_calls": loaded}
