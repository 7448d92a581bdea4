"""AG-UI runs read from and written to the conversation: a thread is a conversation of the caller's
(another user's thread of the same id is never joined), a run's new user message is a turn posted
through chat.services as the chat posts it, its `resume` entries are decisions (aguilink.resume), and
what the run streams is what the rows say since it began (`Cursor`, `follow`). Sync: the app calls it
on AG-UI's own threads (aguilink.pool)."""
import json
import uuid
from dataclasses import dataclass, field

from ag_ui.core import (
    BaseEvent, RunAgentInput, RunFinishedEvent, StateSnapshotEvent, TextMessageContentEvent, TextMessageEndEvent,
    TextMessageStartEvent, ToolCallArgsEvent, ToolCallEndEvent, ToolCallResultEvent, ToolCallStartEvent,
)
from ag_ui.core.events import RunFinishedCancelledOutcome, RunFinishedInterruptOutcome, RunFinishedSuccessOutcome
from django.db import IntegrityError, transaction

from approvals.models import Approval
from chat import services as chat_services
from chat.loop import STOPPED_BY
from chat.models import Agent, Conversation, Message, ToolCall
from chat.quotas import QuotaExceeded
from core.inputs import is_storable

from . import resume
from .interrupts import interrupt_for
from .models import PostedRun
from .resume import Refused  # one refusal for the whole run, its decisions' included

MAX_THREAD = 200  # Conversation.external_thread
Status = ToolCall.Status
FINISHED_CALLS = {
    Status.SUCCEEDED, Status.FAILED, Status.REJECTED, Status.EXPIRED, Status.INTERRUPTED, Status.CANCELLED, Status.LAPSED,
}
MOVING = (Conversation.Status.RUNNING, Conversation.Status.WAITING_FOR_APPROVAL)


@dataclass
class Cursor:
    """What a run has streamed: it shows the conversation's messages after `after` and the results of
    the calls it watches (those open when it began, and those of its messages)."""

    conversation_id: uuid.UUID
    thread_id: str
    run_id: str
    after: int
    watched: set[int] = field(default_factory=set)
    sent_messages: set[int] = field(default_factory=set)
    sent_calls: set[int] = field(default_factory=set)
    sent_results: set[int] = field(default_factory=set)
    state: dict | None = None


@dataclass
class Step:
    events: list[BaseEvent]
    finished: RunFinishedEvent | None = None  # the run's end, once it paused or is over
    error: tuple[str, str] | None = None  # (message, code) of a run that failed


def thread_conversation(user, agent: Agent, thread_id: str) -> Conversation | None:
    """The caller's conversation with this agent for `thread_id`: one an AG-UI run started under that
    thread, or the chat conversation whose id it is (to go on with a conversation begun in the chat)."""
    found = Conversation.objects.filter(owner=user, agent=agent, source=Conversation.Source.CHAT)
    try:
        by_id = found.filter(pk=uuid.UUID(thread_id), external_thread="").first()
    except ValueError:
        by_id = None
    return by_id or found.filter(external_thread=thread_id).first()


def begin(user, agent: Agent, run: RunAgentInput) -> Cursor:
    """Start the run: decide its `resume` entries, or post its new user message (the last of
    `messages`, when it is the user's), or, with neither, follow the thread as it is. Raises Refused."""
    thread_id = run.thread_id
    if not thread_id.strip() or len(thread_id) > MAX_THREAD or not is_storable(thread_id):
        raise Refused(f"threadId is text of 1 to {MAX_THREAD} characters.", "invalid_thread")
    conversation = thread_conversation(user, agent, thread_id)
    if run.resume:
        if conversation is None:
            raise Refused("No such thread: its interrupts cannot be resumed.", "unknown_thread")
        cursor = _cursor(conversation, run)
        resume.apply(run.resume, conversation=conversation, user=user)
        return cursor
    text = new_user_text(run)
    if text is None:
        if conversation is None:
            raise Refused("No such thread, and no user message to start it with.", "unknown_thread")
        return _cursor(conversation, run)
    if conversation is not None and (posted := _retried(conversation, run, text)) is not None:
        return _cursor(conversation, run, after=posted.after)  # nothing is posted twice: the run is shown again
    try:
        if conversation is None:
            conversation = _start(user, agent, thread_id, text, run.run_id)
            return _cursor(conversation, run, after=0)
        _refuse_busy(conversation)
        with transaction.atomic():
            message = chat_services.post_message(conversation=conversation, user=user, content=text)
            _remember(conversation, run.run_id, message.position, after=message.position)
    except (chat_services.InvalidMessage, QuotaExceeded, chat_services.NotOwner, chat_services.UnknownAgent) as exc:
        raise Refused(str(exc) or "The message was refused.", "message_refused") from None
    return _cursor(conversation, run, after=message.position)


def _retried(conversation: Conversation, run: RunAgentInput, text: str) -> PostedRun | None:
    """The run this one retries: the one that posted the thread's latest user message, under the
    same runId, with the same text. A runId used again for another message is a new run."""
    posted = PostedRun.objects.filter(conversation=conversation).order_by("-position").first()
    if posted is None or posted.run_key != PostedRun.key(run.run_id):
        return None
    latest = conversation.messages.filter(role=Message.Role.USER).order_by("-position").values_list("position", "content").first()
    return posted if latest == (posted.position, text) else None


def _remember(conversation: Conversation, run_id: str, position: int, *, after: int) -> None:
    PostedRun.objects.create(conversation=conversation, run_key=PostedRun.key(run_id), position=position, after=after)


def new_user_text(run: RunAgentInput) -> str | None:
    """The text of the run's new turn: the last message, when it is the user's (a client sends the
    whole thread each run); None when the last message is not the user's. Raises Refused for a user
    message that holds something other than text."""
    if not run.messages or run.messages[-1].role != "user":
        return None
    content = run.messages[-1].content
    if isinstance(content, str):
        return content
    if all(getattr(part, "type", "") == "text" for part in content):
        return "\n".join(part.text for part in content)
    raise Refused("This agent reads text only: send the user message as text.", "unsupported_content")


def _start(user, agent: Agent, thread_id: str, text: str, run_id: str) -> Conversation:
    """A new conversation for the thread, started as the chat starts one. Two first runs of one thread
    at once: the unique thread constraint keeps one, and the other is told the thread is busy."""
    try:
        with transaction.atomic():
            conversation = chat_services.start_conversation(user=user, agent=agent, content=text)
            Conversation.objects.filter(pk=conversation.pk).update(external_thread=thread_id)
            _remember(conversation, run_id, 1, after=0)  # a new conversation's first message
            return conversation
    except IntegrityError:
        raise Refused("This thread's first run is under way: follow it with a run without a new message.", "busy") from None


def _refuse_busy(conversation: Conversation) -> None:
    """A new turn waits for the last one: a thread that waits for interrupts is resumed, not written to."""
    pending = list(Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).values_list("pk", flat=True))
    if pending:
        raise Refused(f"This thread waits for interrupts {', '.join(map(str, pending))}: resume them first.", "interrupted")
    conversation.refresh_from_db(fields=["status"])
    if conversation.status in MOVING:
        raise Refused("This thread's last run is still going: follow it with a run without a new message.", "busy")


def _cursor(conversation: Conversation, run: RunAgentInput, *, after: int | None = None) -> Cursor:
    if after is None:
        after = conversation.messages.order_by("-position").values_list("position", flat=True).first() or 0
    watched = set(
        ToolCall.objects.filter(message__conversation=conversation).exclude(status__in=FINISHED_CALLS).values_list("pk", flat=True)
    )
    return Cursor(conversation.pk, run.thread_id, run.run_id, after, watched)


def follow(cursor: Cursor) -> Step:
    """What the rows say since the cursor's last step, as events, and whether the run is over: paused
    (the pending approvals as interrupts), done, stopped or failed."""
    conversation = Conversation.objects.get(pk=cursor.conversation_id)
    # Pending approvals first: their calls are stored before them, so the messages read next hold them.
    pending = list(
        Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING)
        .select_related("tool_call", "conversation__agent", "requested_by").order_by("requested_at", "pk")
    )
    messages = list(conversation.messages.filter(position__gt=cursor.after).order_by("position"))
    said = [message for message in messages if message.role == Message.Role.ASSISTANT]
    calls = list(ToolCall.objects.filter(message__in=said).select_related("message").order_by("message__position", "position"))
    watched = list(ToolCall.objects.filter(pk__in=cursor.watched - {call.pk for call in calls}).select_related("message"))
    events: list[BaseEvent] = []
    for message in said:
        events += _text_events(cursor, message)
        events += _call_events(cursor, message, [call for call in calls if call.message_id == message.pk])
    for call in watched + calls:
        cursor.watched.add(call.pk)
        if call.status in FINISHED_CALLS and call.pk not in cursor.sent_results:
            cursor.sent_results.add(call.pk)
            events.append(ToolCallResultEvent(
                message_id=f"{_message_id(cursor, call.message.position)}-result-{call.call_id}", tool_call_id=call.call_id,
                content=call.result or call.error or call.status, role="tool",
            ))
    state = {"conversationId": str(conversation.pk), "status": conversation.status, "pendingInterrupts": [str(a.pk) for a in pending]}
    if state != cursor.state:
        cursor.state = state
        events.append(StateSnapshotEvent(snapshot=state))
    if conversation.status == Conversation.Status.FAILED:
        return Step(events, error=(conversation.error or "The run failed.", "run_failed"))
    if pending and conversation.status != Conversation.Status.RUNNING:
        outcome = RunFinishedInterruptOutcome(interrupts=[interrupt_for(approval) for approval in pending])
        return Step(events, finished=_finished(cursor, outcome))
    if not pending and conversation.status == Conversation.Status.IDLE:
        stopped = any(m.role == Message.Role.SYSTEM and m.content.startswith(STOPPED_BY) for m in messages)
        outcome = RunFinishedCancelledOutcome() if stopped else RunFinishedSuccessOutcome()
        return Step(events, finished=_finished(cursor, outcome))
    return Step(events)


def _finished(cursor: Cursor, outcome) -> RunFinishedEvent:
    return RunFinishedEvent(thread_id=cursor.thread_id, run_id=cursor.run_id, outcome=outcome)


def _message_id(cursor: Cursor, position: int) -> str:
    return f"{cursor.conversation_id}-{position}"


def _text_events(cursor: Cursor, message: Message) -> list[BaseEvent]:
    if not message.content or message.pk in cursor.sent_messages:
        return []
    cursor.sent_messages.add(message.pk)
    message_id = _message_id(cursor, message.position)
    return [
        TextMessageStartEvent(message_id=message_id, role="assistant"),
        TextMessageContentEvent(message_id=message_id, delta=message.content),
        TextMessageEndEvent(message_id=message_id),
    ]


def _call_events(cursor: Cursor, message: Message, calls: list[ToolCall]) -> list[BaseEvent]:
    events = []
    for call in calls:
        if call.pk in cursor.sent_calls:
            continue
        cursor.sent_calls.add(call.pk)
        arguments = json.dumps(call.arguments, ensure_ascii=False) if call.arguments else call.raw_arguments or "{}"
        events += [
            ToolCallStartEvent(tool_call_id=call.call_id, tool_call_name=call.name, parent_message_id=_message_id(cursor, message.position)),
            ToolCallArgsEvent(tool_call_id=call.call_id, delta=arguments),
            ToolCallEndEvent(tool_call_id=call.call_id),
        ]
    return events
