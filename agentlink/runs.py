"""A2A tasks read from the conversation: a task is a turn, a context is a conversation, and the
task's state is what the rows say now (so it survives every restart), in Python for one task and
in SQL for a filtered list (`with_state`). Sync: the handler calls it on A2A's threads (agentlink.pool)."""
import uuid
from dataclasses import dataclass

from django.db import transaction
from django.db import models
from django.db.models import Case, DateTimeField, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.functions import Coalesce
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.json_format import ParseDict
from google.protobuf.timestamp_pb2 import Timestamp

from a2a.types import a2a_pb2 as pb
from approvals.models import Approval
from approvals.summary import summarize
from chat import services as chat_services
from chat.loop import STOPPED_BY
from chat.models import Agent, Conversation, Message, ToolCall

from .models import HOPS_KEY, Task

State = pb.TaskState
TERMINAL = {State.TASK_STATE_COMPLETED, State.TASK_STATE_FAILED, State.TASK_STATE_CANCELED}
FINAL_STATES = {
    Task.FinalState.COMPLETED: State.TASK_STATE_COMPLETED,
    Task.FinalState.FAILED: State.TASK_STATE_FAILED,
    Task.FinalState.CANCELED: State.TASK_STATE_CANCELED,
}
INTERRUPT_TYPE = "tool_approval"
MAX_HOPS_READ = 10_000  # a hop count past this is not a count
# How kagent's UI (and upstream ADK) tells a tool call's data part from its result's: it reads
# `adk_type`, then `kagent_type`, in the part's metadata.
FUNCTION_CALL, FUNCTION_RESPONSE = "function_call", "function_response"
PART_TYPE_KEYS = ("kagent_type", "adk_type")
INTERRUPT_DATA = "interrupt_data"  # kagent_type of a pause's data parts
# kagent's HITL extension (its UI reads a pause only there): the message lists the URI in
# `extensions` and carries the payload in its metadata under that URI; a reply comes back the same way.
HITL_EXTENSION = "https://kagent.dev/extensions/hitl/v1"
SEED_OPTIONS = ["approve", "deny", "modify"]  # seed 004's approval_request; "modify" only for a tool call's arguments


class Busy(Exception):
    """The context has a task that is not over: the message must go to it (or wait)."""


def visible_tasks(user, agent: Agent) -> QuerySet[Task]:
    """The caller's own tasks with this agent: an A2A client acts as the token's user."""
    return Task.objects.select_related("conversation").filter(conversation__owner=user, conversation__agent=agent)


def task_for(user, agent: Agent, task_id: str) -> Task | None:
    key = parse_id(task_id)
    return visible_tasks(user, agent).filter(pk=key).first() if key else None


def conversation_for(user, agent: Agent, context_id: str) -> Conversation | None:
    key = parse_id(context_id)
    return Conversation.objects.filter(pk=key, owner=user, agent=agent).first() if key else None


class BadHops(ValueError):
    pass


def hops_of(message: pb.Message) -> int:
    """How many hitl agents asked in a row before `message` (its metadata's hitl_hops; 0 without)."""
    if not message.HasField("metadata") or HOPS_KEY not in message.metadata.fields:
        return 0
    value = message.metadata.fields[HOPS_KEY]
    number = value.number_value if value.WhichOneof("kind") == "number_value" else -1
    if not (0 <= number <= MAX_HOPS_READ and number == int(number)):
        raise BadHops(f"metadata.{HOPS_KEY} is how many agents asked in a row before this message: a whole number from 0.")
    return int(number)


def start(*, user, agent: Agent, text: str, conversation: Conversation | None, hops: int = 0) -> Task:
    """A new task: the first turn of a new conversation, or the next turn of `conversation` once its
    last task is over (raises Busy otherwise). chat.services checks the agent, quotas and the text;
    posting the message closes the previous task (`close_turn`). `hops`: how many agents asked in a row."""
    with transaction.atomic():
        if conversation is None:
            conversation = chat_services.start_conversation(user=user, agent=agent, content=text)
            return Task.objects.create(conversation=conversation, position=1, hops=hops)
        if conversation.status in (Conversation.Status.RUNNING, Conversation.Status.WAITING_FOR_APPROVAL) or _pending(conversation):
            latest = open_task(conversation)
            where = f"Task {latest.pk}" if latest else "This conversation"
            raise Busy(f"{where} is not over: send the message to it, or wait until it is.")
        message = chat_services.post_message(conversation=conversation, user=user, content=text)
        return Task.objects.create(conversation=conversation, position=message.position, hops=hops)


def open_task(conversation: Conversation) -> Task | None:
    return conversation.a2a_tasks.filter(final_state="").order_by("-position").first()


def close_turn(message: Message) -> None:
    """A user message that starts the next turn (in the chat or over A2A) ends the conversation's
    open task for good: completed, failed or cancelled as it stands now. A reply to a pause (a typed
    decision, a message held until the calls are decided) starts nothing. Its status time stays
    the conversation's `updated_at` of now, the last change of its turn: the next turn moves the
    conversation, not this task."""
    conversation = Conversation.objects.get(pk=message.conversation_id)
    if conversation.status not in (Conversation.Status.IDLE, Conversation.Status.FAILED) or _pending(conversation):
        return
    task = open_task(conversation)
    if task is None or task.position >= message.position:
        return
    state = current_state(conversation, task)
    final = next((name for name, value in FINAL_STATES.items() if value == state), Task.FinalState.COMPLETED)
    Task.objects.filter(pk=task.pk, final_state="").update(
        final_state=final, end_position=message.position, status_at=conversation.updated_at
    )


def with_state(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """`tasks` annotated with `a2a_state`, the TaskState that `read` would give each, computed in SQL
    so that a list filtered by state pages in the database. Keep it in step with `current_state`
    (tests/agentlink/test_a2a_task_state.py checks the two agree in every state)."""
    pending = Approval.objects.filter(conversation_id=OuterRef("conversation_id"), status=Approval.Status.PENDING)
    last_word = (
        Message.objects.filter(conversation_id=OuterRef("conversation_id"), position__gte=OuterRef("position"))
        .exclude(role=Message.Role.USER)
        .order_by("-position")
        .annotate(stopped=Case(When(role=Message.Role.SYSTEM, content__startswith=STOPPED_BY, then=models.Value(1)), default=models.Value(0)))
        .values("stopped")[:1]
    )
    state = Case(
        *[When(final_state=name, then=models.Value(value)) for name, value in FINAL_STATES.items()],
        When(Exists(pending), then=models.Value(State.TASK_STATE_INPUT_REQUIRED)),
        When(
            conversation__status__in=[Conversation.Status.RUNNING, Conversation.Status.WAITING_FOR_APPROVAL],
            then=models.Value(State.TASK_STATE_WORKING),
        ),
        When(conversation__status=Conversation.Status.FAILED, then=models.Value(State.TASK_STATE_FAILED)),
        When(canceled=True, then=models.Value(State.TASK_STATE_CANCELED)),
        When(Q(last_stopped__isnull=True), then=models.Value(State.TASK_STATE_WORKING)),
        When(last_stopped=1, then=models.Value(State.TASK_STATE_CANCELED)),
        default=models.Value(State.TASK_STATE_COMPLETED),
        output_field=IntegerField(),
    )
    return tasks.annotate(last_stopped=Subquery(last_word, output_field=IntegerField())).annotate(a2a_state=state)


def with_status_time(tasks: QuerySet[Task]) -> QuerySet[Task]:
    """`tasks` annotated with `a2a_status_at`, the time `as_proto` gives as the status timestamp
    (`status_time`), in SQL: ListTasks orders and filters by it."""
    return tasks.annotate(a2a_status_at=Coalesce("status_at", "conversation__updated_at", output_field=DateTimeField()))


def status_time(task: Task, conversation: Conversation):
    """When the task's status last changed: once it is over, the time stored as it closed; until
    then the conversation's last change (every state change of the turn moves the conversation)."""
    return task.status_at or conversation.updated_at


MAX_CLIENTS_SHOWN = 20  # clients (tokens) whose last pause a task keeps; the oldest is forgotten first


def note_shown(task: Task, reading: "Reading") -> None:
    """Record what an input-required status about to be sent to the calling client (`task.client`,
    its token hashed) lists ({approval id: shown_hash}): that client's blanket reply decides those
    calls at those versions and nothing pending since, whatever another client (a monitor, a second
    program of the same user) was sent meanwhile. Written only when it changed, so a client polling a
    pause costs no writes."""
    if reading.state != State.TASK_STATE_INPUT_REQUIRED or not reading.pending:
        return
    client = getattr(task, "client", "")
    listed = {str(approval.pk): approval.shown_hash for approval in reading.pending}
    stored = dict(Task.objects.filter(pk=task.pk).values_list("shown", flat=True).first() or {})
    if stored.get(client) != listed:
        stored.pop(client, None)
        stored[client] = listed  # the newest last
        while len(stored) > MAX_CLIENTS_SHOWN:
            stored.pop(next(iter(stored)))
        Task.objects.filter(pk=task.pk).update(shown=stored)
    task.shown = stored


def shown_to_client(task: Task) -> dict[int, str]:
    """What the last pause sent for `task` to the calling client (`task.client`) listed, read fresh
    from its row."""
    stored = Task.objects.filter(pk=task.pk).values_list("shown", flat=True).first() or {}
    listed = stored.get(getattr(task, "client", ""), {})
    return {int(key): value for key, value in listed.items() if isinstance(value, str)}


@dataclass
class Reading:
    """What a task is now: its state, the words for people, and the structured parts of a pause."""

    state: int
    text: str = ""
    data: list[dict] | None = None
    pending: list[Approval] | None = None
    answer: str = ""


def read(task: Task) -> Reading:
    conversation = Conversation.objects.get(pk=task.conversation_id)
    task.conversation = conversation
    turn = _turn(task)
    answer = _answer(turn)
    if task.final_state:
        state = FINAL_STATES[task.final_state]
        return Reading(state, answer if state == State.TASK_STATE_COMPLETED else "", answer=answer)
    pending = _pending(conversation)
    if pending:
        return Reading(State.TASK_STATE_INPUT_REQUIRED, _notice_since(pending) + _pause_text(pending), pause_parts(pending), pending)
    state = current_state(conversation, task, turn, pending=pending)
    if state == State.TASK_STATE_FAILED:
        return Reading(state, conversation.error or "The run failed.")
    if state == State.TASK_STATE_CANCELED:
        notice = turn.filter(role=Message.Role.SYSTEM, content__startswith=STOPPED_BY).order_by("-position").first()
        return Reading(state, notice.content if notice else "Cancelled.")
    if state == State.TASK_STATE_COMPLETED:
        return Reading(state, answer, answer=answer)
    return Reading(state)


def _turn(task: Task) -> QuerySet[Message]:
    """The task's messages: from the one that started it to the first of the next turn."""
    turn = Message.objects.filter(conversation_id=task.conversation_id, position__gte=task.position)
    return turn.filter(position__lt=task.end_position) if task.end_position else turn


def current_state(
    conversation: Conversation, task: Task | None, turn: QuerySet[Message] | None = None, *, pending: list | None = None
) -> int:
    """The state of the conversation's latest task, from the conversation's status (and its pending
    approvals, when the caller has read them already)."""
    if pending if pending is not None else _pending(conversation):
        return State.TASK_STATE_INPUT_REQUIRED
    if conversation.status in (Conversation.Status.RUNNING, Conversation.Status.WAITING_FOR_APPROVAL):
        return State.TASK_STATE_WORKING
    if conversation.status == Conversation.Status.FAILED:
        return State.TASK_STATE_FAILED
    if task is not None and task.canceled:
        return State.TASK_STATE_CANCELED
    if turn is None and task is not None:
        turn = Message.objects.filter(conversation=conversation, position__gte=task.position)
    last = turn.exclude(role=Message.Role.USER).order_by("-position").first() if turn is not None else None
    if last is None:  # idle with no word after the task's message: the run has not shown anything yet
        return State.TASK_STATE_WORKING
    if last.role == Message.Role.SYSTEM and last.content.startswith(STOPPED_BY):
        return State.TASK_STATE_CANCELED
    return State.TASK_STATE_COMPLETED


def as_proto(task: Task, reading: Reading, *, history_length: int | None = None, artifacts: bool = True) -> pb.Task:
    """The task as the A2A types say it, with its status message and, once completed, its answer
    (without artifacts when `artifacts` is false: ListTasks omits them unless asked)."""
    conversation = task.conversation
    status = pb.TaskStatus(state=reading.state, timestamp=_timestamp(status_time(task, conversation)))
    if reading.text or reading.data:
        status.message.CopyFrom(status_message(task, reading))
    proto = pb.Task(id=str(task.pk), context_id=str(conversation.pk), status=status)
    if reading.state == State.TASK_STATE_INPUT_REQUIRED and reading.data:
        proto.metadata.CopyFrom(interrupt_metadata())
    if artifacts:
        proto.artifacts.extend(tool_artifacts(task))
        if reading.state == State.TASK_STATE_COMPLETED and reading.answer:
            proto.artifacts.append(answer_artifact(task, reading.answer))
    if history_length is None or history_length > 0:
        proto.history.extend(history(task, limit=history_length))
    return proto


def status_message(task: Task, reading: Reading) -> pb.Message:
    message = pb.Message(
        message_id=f"{task.pk}-status-{reading.state}",
        context_id=str(task.conversation_id),
        task_id=str(task.pk),
        role=pb.Role.ROLE_AGENT,
    )
    if reading.text:
        message.parts.append(pb.Part(text=reading.text))
    for data in reading.data or []:
        # kagent reads a part's kind in its metadata: a pause's parts are its "interrupt_data".
        message.parts.append(pb.Part(data=_value(data), media_type="application/json", metadata=_struct({"type": data["type"], "kagent_type": INTERRUPT_DATA})))
    if reading.data:
        message.metadata.CopyFrom(_struct({"interrupt_type": INTERRUPT_TYPE, HITL_EXTENSION: kagent_request(reading.pending)}))
        message.extensions.append(HITL_EXTENSION)
    return message


def kagent_request(pending: list[Approval]) -> dict:
    """The pause as kagent's HITL extension says it: the tool calls (ids as strings, no other
    fields: kagent's models forbid extra ones), or, when only questions wait, those, under one id
    naming them all in order (its `ask_user_response` answers them by position)."""
    actions = [approval for approval in pending if approval.kind != Approval.Kind.QUESTION]
    if actions:
        return {"type": "tool_approval_request", "tools": [_kagent_tool(approval) for approval in actions]}
    return {"type": "ask_user_request", "id": ",".join(str(approval.pk) for approval in pending), "questions": [
        {"question": approval.question["text"], "choices": approval.question.get("options") or [],
         "multiple": approval.question["type"] == "multi_choice"}
        for approval in pending
    ]}


def interrupt_metadata() -> Struct:
    """What marks a pause, on its status message, its task and its status-update event alike (kagent
    reads the event's)."""
    return _struct({"interrupt_type": INTERRUPT_TYPE})


def answer_artifact(task: Task, answer: str) -> pb.Artifact:
    return pb.Artifact(artifact_id=f"{task.pk}-answer", name="answer", parts=[pb.Part(text=answer)])


def tool_artifacts(task: Task) -> list[pb.Artifact]:
    """The turn's tool calls that ran or were settled, and their results, as kagent sends them: a
    data part `{"id", "name", "args"}` typed function_call, then, once the call has its result, a
    part `{"id", "name", "response": {"result", "isError"}}` typed function_response, each in an
    artifact of its own (a stream sends each once, as it appears). A call still waiting for a human
    is in the pause instead."""
    calls = ToolCall.objects.filter(message__in=_turn(task)).order_by("message__position", "position", "pk")
    edits = dict(Approval.objects.filter(tool_call__in=calls, edited_arguments__isnull=False).values_list("tool_call_id", "edited_arguments"))
    artifacts = []
    for call in calls.only("pk", "call_id", "name", "arguments", "status", "result", "error", "started_at"):
        finished = call.status in ToolCall.FINISHED
        if not (finished or call.started_at):
            continue
        args = edits.get(call.pk, call.arguments)  # what ran: a human's edit in place of the model's arguments
        artifacts.append(pb.Artifact(artifact_id=f"{task.pk}-call-{call.pk}", name="tool_call", parts=[
            _typed_part({"id": call.call_id, "name": call.name, "args": args}, FUNCTION_CALL)
        ]))
        if finished:
            failed = call.status != ToolCall.Status.SUCCEEDED or bool(call.error)
            response = {"result": call.result or call.error, "isError": failed}
            artifacts.append(pb.Artifact(artifact_id=f"{task.pk}-result-{call.pk}", name="tool_result", parts=[
                _typed_part({"id": call.call_id, "name": call.name, "response": response}, FUNCTION_RESPONSE)
            ]))
    return artifacts


def _typed_part(data: dict, kind: str) -> pb.Part:
    return pb.Part(data=_value(data), media_type="application/json", metadata=_struct(dict.fromkeys(PART_TYPE_KEYS, kind)))


def history(task: Task, *, limit: int | None = None) -> list[pb.Message]:
    """The turn's user and agent messages, oldest first (the last `limit` of them)."""
    turn = _turn(task).filter(role__in=(Message.Role.USER, Message.Role.ASSISTANT)).exclude(content="")
    messages = list(turn.order_by("-position")[:limit] if limit and limit > 0 else turn.order_by("-position"))
    return [
        pb.Message(
            message_id=f"{task.conversation_id}-{message.position}",
            context_id=str(task.conversation_id),
            task_id=str(task.pk),
            role=pb.Role.ROLE_USER if message.role == Message.Role.USER else pb.Role.ROLE_AGENT,
            parts=[pb.Part(text=message.content)],
        )
        for message in reversed(messages)
    ]


def pause_parts(pending: list[Approval]) -> list[dict]:
    """The pending calls in the shapes A2A clients read: the seed documents' `action_requests`,
    kagent's `tool_approval_request`, seed 004's `approval_request` (one per call, answered with an
    `approval_response`), and questions as `ask_user_request`. Every `id` is the
    approval's id, which a decision names; every `shown_hash` the version shown, which a decision
    by id sends back (required to approve a call edited since it was requested)."""
    actions = [approval for approval in pending if approval.kind != Approval.Kind.QUESTION]
    questions = [approval for approval in pending if approval.kind == Approval.Kind.QUESTION]
    parts = []
    if actions:
        requests = [_action_request(approval) for approval in actions]
        parts.append({"type": "tool_approval", "interrupt_type": INTERRUPT_TYPE, "action_requests": requests})
        parts.append({"type": "tool_approval_request", "tools": [
            _kagent_tool(approval) | {"id": approval.pk, "shown_hash": approval.shown_hash} for approval in actions
        ]})
        parts.extend(_seed_request(approval, request) for approval, request in zip(actions, requests))
    if questions:
        parts.append({"type": "ask_user_request", "questions": [
            {"id": approval.pk} | approval.question | {"shown_hash": approval.shown_hash} for approval in questions
        ]})
    return parts


def _kagent_tool(approval: Approval) -> dict:
    """A tool call as kagent's tool_approval_request lists it (the extension's shape: nothing more)."""
    call = approval.tool_call
    return {"id": str(approval.pk), "call_id": call.call_id, "name": call.name, "args": _args(approval)}


def _args(approval: Approval) -> dict:
    """The arguments a decision is about: a human's edit, if any, else the model's."""
    return approval.edited_arguments if approval.is_edited else approval.tool_call.arguments


def _action_request(approval: Approval) -> dict:
    call = approval.tool_call
    request = {
        "name": call.name,
        "args": _args(approval),
        "id": approval.pk,
        "shown_hash": approval.shown_hash,
        "kind": approval.kind,
        "risk": approval.risk,
        "description": approval.reason,
        "summary": summarize(approval).as_json(),
        "confirmation_required": approval.confirmation_required,
    }
    if approval.confirmation_required:
        request["confirmation_hint"] = approval.confirmation_hint
    if approval.kind == Approval.Kind.PLAN:
        request["plan"] = approval.plan
    if approval.preview:
        request["preview"] = approval.preview
    return request


def _words(approval: Approval) -> str:
    """What a human reads of a pending call (approvals.summary): what approving does, who asked, why."""
    summary = summarize(approval)
    return f"{summary.head} ({approval.risk} risk). Why: {summary.why}"


def _seed_request(approval: Approval, request: dict) -> dict:
    """Seed 004's shape: `action` the tool, `message` what the human reads, `input` the arguments
    that a "modified" response replaces (`modified_input`)."""
    options = SEED_OPTIONS if approval.kind == Approval.Kind.ACTION else [option for option in SEED_OPTIONS if option != "modify"]
    return {
        "type": "approval_request", "id": approval.pk, "shown_hash": approval.shown_hash, "action": request["name"],
        "message": _words(approval), "input": request["args"], "options": options,
    }


def _pause_text(pending: list[Approval]) -> str:
    lines = []
    for approval in pending:
        if approval.kind == Approval.Kind.QUESTION:
            lines.append(f"- #{approval.pk} asks: {approval.question['text']}")
        else:
            summary = summarize(approval)
            lines.append(f"- #{approval.pk} {approval.tool_call.name}: {summary.sentence} ({approval.risk} risk, asked by {summary.asked_by}). Why: {summary.why}")
    count = len(pending)
    head = "1 call waits" if count == 1 else f"{count} calls wait"
    return f"{head} for a human decision:\n" + "\n".join(lines)


def _notice_since(pending: list[Approval]) -> str:
    """What the chat said of a reply sent while the calls wait (that it decided nothing, and why)."""
    asked_at = max(approval.tool_call.message.position for approval in pending)
    last = Message.objects.filter(conversation_id=pending[0].conversation_id).order_by("-position").first()
    return f"{last.content}\n\n" if last.role == Message.Role.SYSTEM and last.position > asked_at else ""


def _pending(conversation: Conversation) -> list[Approval]:
    return list(
        Approval.objects.select_related("tool_call__message", "conversation__agent", "requested_by")
        .filter(conversation=conversation, status=Approval.Status.PENDING)
        .order_by("pk")
    )


def _answer(turn: QuerySet[Message]) -> str:
    last = turn.filter(role=Message.Role.ASSISTANT).exclude(content="").order_by("-position").first()
    return last.content if last else ""


def parse_id(value: str):
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


def _timestamp(moment) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def _value(data) -> Value:
    value = Value()
    ParseDict(data, value)
    return value


def _struct(data: dict) -> Struct:
    struct = Struct()
    struct.update(data)
    return struct
