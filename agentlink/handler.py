"""The A2A request handler: the SDK's JSON-RPC dispatcher calls it, already authenticated (the
caller's user and the agent are in the call context, see agentlink.app). Thin: the rows are read
and written by agentlink.runs and agentlink.decisions, on A2A's own threads (agentlink.pool).

The run happens in a Celery worker, not here, so this is the SDK's abstract RequestHandler rather
than its DefaultRequestHandler (which runs an AgentExecutor inside the request). A blocking send
and a stream wait for the task to move by listening to the conversation's channel-layer group,
the one the chat's pushes go to, and read the rows again at least every second (pushes are best
effort).

Every input-required status it sends is recorded on the task (runs.note_shown), so that a blanket
reply decides only what that pause listed. An error of ours is "internal error" with an id that the
log carries next to the traceback, never the exception's text."""
import asyncio
import functools
import inspect
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from datetime import datetime, timezone

from django.conf import settings
from django.core import signing
from django.db.models import Q

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from approvals.models import Approval
from chat import services as chat_services
from chat.quotas import QuotaExceeded
from core.live import Listening, conversation_group

from . import decisions, push, runs
from .pool import database

logger = logging.getLogger(__name__)

State = pb.TaskState
MOVING = {State.TASK_STATE_SUBMITTED, State.TASK_STATE_WORKING}
RECHECK_SECONDS = 1.0
PAGE_SIZE, MAX_PAGE_SIZE = 50, 100


def guarded(method):
    """An exception that is not an A2A error becomes InternalError("internal error (id …)"): the id
    is logged with the traceback, and nothing of the exception reaches the client."""

    def internal(exc: Exception, context: ServerCallContext) -> InternalError:
        error_id = uuid.uuid4().hex[:12]
        logger.error("a2a internal error %s in %s", error_id, context.state.get("method") or method.__name__, exc_info=exc)
        return InternalError(message=f"internal error (id {error_id})", data={"error_id": error_id})

    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream(self, params, context: ServerCallContext):
            inner = method(self, params, context)
            try:
                async for event in inner:
                    yield event
            except A2AError:
                raise
            except Exception as exc:
                raise internal(exc, context) from None
            finally:
                await inner.aclose()

        return stream

    @functools.wraps(method)
    async def call(self, params, context: ServerCallContext):
        try:
            return await method(self, params, context)
        except A2AError:
            raise
        except Exception as exc:
            raise internal(exc, context) from None

    return call


class AgentHandler(RequestHandler):
    """One handler for every agent: the agent and the user come with each call's context."""

    configs = push.ConfigStore()  # push notification configs, each its owner's (agentlink.push)

    @guarded
    @validate_request_params
    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        task, notice = await self._receive(params, context)
        if params.configuration.return_immediately:
            return _with_notice(await self._snapshot(task), notice)
        deadline = time.monotonic() + settings.HITL_A2A_WAIT_SECONDS
        async for proto in self._follow(task, deadline=deadline):
            last = proto
        return _with_notice(last, notice)

    @guarded
    @validate_request_params
    async def on_message_send_stream(self, params: pb.SendMessageRequest, context: ServerCallContext) -> AsyncGenerator:
        task, notice = await self._receive(params, context)
        async for event in self._events(task):
            yield _with_notice(event, notice) if isinstance(event, pb.Task) else event
            notice = ""

    @guarded
    @validate_request_params
    async def on_subscribe_to_task(self, params: pb.SubscribeToTaskRequest, context: ServerCallContext) -> AsyncGenerator:
        task = await self._task(params.id, context)
        if (await database(runs.read)(task)).state in runs.TERMINAL:  # nothing more will happen: GetTask reads it
            raise UnsupportedOperationError(message=f"Task {task.pk} is over: there is nothing to subscribe to; GetTask reads it.")
        async for event in self._events(task):
            yield event

    @guarded
    @validate_request_params
    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task:
        task = await self._task(params.id, context)
        history = params.history_length if params.HasField("history_length") else None
        if history is not None and history < 0:
            raise InvalidParamsError(message="historyLength is a number of messages: 0 or more.")
        return await self._snapshot(task, history_length=history)

    @guarded
    @validate_request_params
    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        state = context.state
        return await database(_list_tasks)(params, state["hitl_user"], state["hitl_agent"], client=state.get("hitl_client", ""))

    @guarded
    @validate_request_params
    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task:
        task = await self._task(params.id, context)
        await database(_cancel)(task, context.state["hitl_user"])
        return await self._snapshot(task)

    @guarded
    @validate_request_params
    async def on_create_task_push_notification_config(
        self, params: pb.TaskPushNotificationConfig, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        return await self.configs.set_info(params.task_id, params, context)

    @guarded
    @validate_request_params
    async def on_get_task_push_notification_config(
        self, params: pb.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        wanted = params.id or params.task_id
        for config in await self.configs.get_info(params.task_id, context):
            if config.id == wanted:
                return config
        raise TaskNotFoundError(message="Push notification config not found.")

    @guarded
    @validate_request_params
    async def on_list_task_push_notification_configs(
        self, params: pb.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        return pb.ListTaskPushNotificationConfigsResponse(configs=await self.configs.get_info(params.task_id, context))

    @guarded
    @validate_request_params
    async def on_delete_task_push_notification_config(
        self, params: pb.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        await self.configs.delete_info(params.task_id, context, params.id)

    async def on_get_extended_agent_card(self, params, context):
        raise UnsupportedOperationError(message="This agent has no extended card: its card is the whole of it.")

    async def _task(self, task_id: str, context: ServerCallContext) -> runs.Task:
        task = await database(runs.task_for)(context.state["hitl_user"], context.state["hitl_agent"], task_id)
        if task is None:  # unknown, or another user's: the same answer
            raise TaskNotFoundError
        task.client = context.state.get("hitl_client", "")  # what this client is shown is kept as its own
        return task

    async def _receive(self, params: pb.SendMessageRequest, context: ServerCallContext) -> tuple[runs.Task, str]:
        """The task the message starts or continues, and a word for the client about its reply
        (the calls it left alone), if any."""
        user, agent = context.state["hitl_user"], context.state["hitl_agent"]
        message = params.message
        config = params.configuration.task_push_notification_config if params.configuration.HasField("task_push_notification_config") else None
        if config is not None:  # refused before anything is started or decided (off the database threads: it resolves a name)
            await asyncio.to_thread(push.check_config, agent, config)
        if message.task_id:
            task = await self._task(message.task_id, context)
            if message.context_id and message.context_id != str(task.conversation_id):
                raise InvalidParamsError(message="That task belongs to another contextId.")
            if config is not None:  # one too many is refused before anything is decided
                await database(push.check_room)(task, config)
            notice = await database(_continue)(task, user, message)
        else:
            try:
                task = await database(_start)(user, agent, message)
            except runs.Busy as exc:
                raise InvalidRequestError(message=str(exc)) from None
            task.client, notice = context.state.get("hitl_client", ""), ""
        if config is not None:  # checked above already
            await database(push.set_config)(user, task, config)
        return task, notice

    async def _snapshot(self, task: runs.Task, *, history_length: int | None = None) -> pb.Task:
        return await database(_snapshot)(task, history_length)

    async def _follow(self, task: runs.Task, *, deadline: float) -> AsyncGenerator[pb.Task]:
        """The task each time it changes, until it stops moving (paused, over) or the deadline."""
        async with Listening(conversation_group(task.conversation_id)) as listening:
            seen = None
            while True:
                proto = await self._snapshot(task, history_length=0)
                key = (proto.status.state, proto.status.message.SerializeToString(), tuple(a.artifact_id for a in proto.artifacts))
                if key != seen:
                    seen = key
                    yield proto
                if proto.status.state not in MOVING or time.monotonic() >= deadline:
                    return
                await listening.wait(min(RECHECK_SECONDS, deadline - time.monotonic()))

    async def _events(self, task: runs.Task) -> AsyncGenerator:
        """A stream: the task, then each tool call and result as it appears and the answer as
        artifacts, a status update at each change (a pause's marked with its interrupt_type, as
        kagent reads it; one for the first task too when it waits or is over already), and the end
        once the task waits for a human or is over."""
        deadline = time.monotonic() + settings.HITL_A2A_STREAM_SECONDS
        sent_artifacts, last_status = None, None
        async for proto in self._follow(task, deadline=deadline):
            status = (proto.status.state, proto.status.message.SerializeToString())
            if sent_artifacts is None:
                sent_artifacts, last_status = {artifact.artifact_id for artifact in proto.artifacts}, status
                yield proto
                if proto.status.state not in MOVING:  # paused or over already: said as a status update too, as kagent reads it
                    yield _status_update(proto)
                continue
            for artifact in proto.artifacts:
                if artifact.artifact_id not in sent_artifacts:
                    sent_artifacts.add(artifact.artifact_id)
                    yield pb.TaskArtifactUpdateEvent(
                        task_id=proto.id, context_id=proto.context_id, artifact=artifact, last_chunk=True
                    )
            if status != last_status:
                last_status = status
                yield _status_update(proto)


def _status_update(proto: pb.Task) -> pb.TaskStatusUpdateEvent:
    """The task's status as an event, with the task's metadata (a pause's interrupt_type)."""
    event = pb.TaskStatusUpdateEvent(task_id=proto.id, context_id=proto.context_id, status=proto.status)
    if proto.HasField("metadata"):
        event.metadata.CopyFrom(proto.metadata)
    return event


def _with_notice(proto: pb.Task, notice: str) -> pb.Task:
    """The task, its status message opening with `notice` (what the reply did not decide)."""
    if not notice:
        return proto
    status = proto.status
    if not status.HasField("message"):
        status.message.CopyFrom(pb.Message(
            message_id=f"{proto.id}-notice", context_id=proto.context_id, task_id=proto.id, role=pb.Role.ROLE_AGENT
        ))
    status.message.parts.insert(0, pb.Part(text=notice + "\n\n"))
    return proto


def _kind_of(part: pb.Part) -> str:
    """What a part is, as a refusal names it: its media type if it says one, else its kind."""
    kind = "a data part" if part.WhichOneof("content") == "data" else "a file part"
    return f"{kind} ({part.media_type})" if part.media_type else kind


def _text(message: pb.Message) -> str:
    return "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text").strip()


def _start(user, agent, message: pb.Message) -> runs.Task:
    try:
        hops = runs.hops_of(message)
    except runs.BadHops as exc:
        raise InvalidParamsError(message=str(exc)) from None
    if hops > settings.HITL_A2A_MAX_HOPS:
        raise InvalidRequestError(
            message=f"{hops} agents asked in a row before this message, and {settings.HITL_A2A_MAX_HOPS} may: refused, so that "
            "agents asking one another cannot go round in circles. Answer without asking this agent."
        )
    conversation = None
    if message.context_id:
        conversation = runs.conversation_for(user, agent, message.context_id)
        if conversation is None:
            raise TaskNotFoundError(message="Context not found (contextId).")
    if any(part.WhichOneof("content") is None for part in message.parts):
        raise InvalidParamsError(message="A part holds nothing: a new task starts with text parts.")
    refused = [_kind_of(part) for part in message.parts if part.WhichOneof("content") != "text"]
    if refused:  # the card's defaultInputModes: text/plain only (agentlink.cards)
        raise ContentTypeNotSupportedError(
            message=f"A new task starts with text parts only (text/plain), not {', '.join(refused)}: "
            "decisions go, as data parts, to the task that asked for them (taskId)."
        )
    if decisions.data_of(message):  # kagent's decision in the metadata, beside a text part
        raise InvalidParamsError(message="A new task starts with text parts only: decisions go to the task that asked for them (taskId).")
    try:
        return runs.start(user=user, agent=agent, text=_text(message), conversation=conversation, hops=hops)
    except (chat_services.InvalidMessage, QuotaExceeded, chat_services.NotOwner) as exc:
        raise InvalidParamsError(message=str(exc)) from None
    except chat_services.UnknownAgent:
        raise TaskNotFoundError(message="Unknown agent.") from None


def _continue(task: runs.Task, user, message: pb.Message) -> str:
    """A message on an existing task: decisions for its pause, read against what the last pause
    sent for it listed (runs.note_shown). A task that is working, or over, takes none (the next turn
    of the context is a message without taskId). Returns what the client should hear of its votes
    toward a quorum and of the calls its reply left alone."""
    reading = runs.read(task)
    if reading.state != State.TASK_STATE_INPUT_REQUIRED:
        try:
            decisions.refuse_decided(conversation=task.conversation, message=message)
        except decisions.Refused as exc:
            raise InvalidParamsError(message=exc.message, data=exc.data) from None
        name = pb.TaskState.Name(reading.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
        if reading.state in runs.TERMINAL:  # the specification's error for a task in a terminal state
            raise UnsupportedOperationError(
                message=f"Task {task.pk} is {name}: it takes no decision now; send a new message with its contextId and no taskId."
            )
        raise InvalidRequestError(message=f"Task {task.pk} is {name}: it takes no decision now; wait until it asks.")
    try:
        outcome = decisions.apply(
            conversation=task.conversation, user=user, message=message, pending=reading.pending,
            shown=runs.shown_to_client(task),
        )
    except decisions.Refused as exc:
        raise InvalidParamsError(message=exc.message, data=exc.data) from None
    except (chat_services.InvalidMessage, QuotaExceeded, chat_services.NotOwner) as exc:
        raise InvalidParamsError(message=str(exc)) from None
    except chat_services.UnknownAgent:
        raise TaskNotFoundError(message="Unknown agent.") from None
    return decisions.notice(outcome)


def _snapshot(task: runs.Task, history_length: int | None) -> pb.Task:
    """The task as it is sent now: a pause it lists is recorded as shown."""
    reading = runs.read(task)
    runs.note_shown(task, reading)
    return runs.as_proto(task, reading, history_length=history_length)


def _cancel(task: runs.Task, user) -> None:
    reading = runs.read(task)
    if reading.state in runs.TERMINAL:
        raise TaskNotCancelableError(message=f"Task {task.pk} is over; there is nothing to cancel.")
    runs.Task.objects.filter(pk=task.pk).update(canceled=True)
    task.canceled = True
    chat_services.stop_conversation(conversation=task.conversation, user=user, via=Approval.Via.A2A)


def _list_tasks(params: pb.ListTasksRequest, user, agent, *, client: str = "") -> pb.ListTasksResponse:
    """A page of the caller's tasks, the most recently updated first, as the specification orders
    them: by status time (the status timestamp each task shows, runs.with_status_time), then id.
    Filtered by state (computed in SQL, runs.with_state) and by status time in the database, and
    paged by a cursor (the status time and id of the page's last task, PageToken), so that every
    page costs the same however deep it is. A task that moves while a client walks the pages goes to
    the front, ahead of the cursor: no other task is skipped or repeated for it, and it is not shown
    twice; a listing from the first page again (or with statusTimestampAfter) shows it as it is now."""
    if params.page_size < 0 or (params.HasField("history_length") and params.history_length < 0):
        raise InvalidParamsError(message="pageSize and historyLength are numbers: 0 or more (0: the default).")
    if params.status and params.status not in pb.TaskState.values():
        raise InvalidParamsError(message=f"status {params.status} is none of the task states.")
    tasks = runs.with_status_time(runs.visible_tasks(user, agent))
    if params.context_id:
        key = runs.parse_id(params.context_id)
        tasks = tasks.filter(conversation_id=key) if key else tasks.none()
    if params.status:
        tasks = runs.with_state(tasks).filter(a2a_state=params.status)
    if params.HasField("status_timestamp_after"):  # "greater than or equal to" (the specification's ListTasksRequest)
        tasks = tasks.filter(a2a_status_at__gte=params.status_timestamp_after.ToDatetime(tzinfo=timezone.utc))
    size = min(params.page_size, MAX_PAGE_SIZE) if params.page_size > 0 else PAGE_SIZE
    cursor = PageToken(user, agent, params)
    total = tasks.count()
    if params.page_token:
        at, last_id = cursor.read(params.page_token)
        tasks = tasks.filter(Q(a2a_status_at__lt=at) | Q(a2a_status_at=at, pk__lt=last_id))
    rows = list(tasks.order_by("-a2a_status_at", "-pk")[:size + 1])  # one more: is there a next page?
    history = params.history_length if params.HasField("history_length") else 0
    page = []
    for task in rows[:size]:
        task.client = client
        reading = runs.read(task)
        runs.note_shown(task, reading)
        page.append(runs.as_proto(task, reading, history_length=history, artifacts=params.include_artifacts))
    following = cursor.after(rows[size - 1]) if len(rows) > size else ""
    return pb.ListTasksResponse(tasks=page, next_page_token=following, page_size=size, total_size=total)


class PageToken:
    """ListTasks' cursor: the status time and id of a page's last task, signed for this user, agent
    and filters, so that a token the server did not give for this very listing (edited, another
    user's, another filter's) is InvalidParamsError rather than some other page."""

    refused = "pageToken is the nextPageToken of an earlier page."

    def __init__(self, user, agent, params: pb.ListTasksRequest):
        self.salt = f"agentlink.list_tasks:{user.pk}:{agent.pk}"
        after = params.status_timestamp_after.ToJsonString() if params.HasField("status_timestamp_after") else ""
        self.listing = [params.context_id, params.status, after]

    def after(self, task: runs.Task) -> str:
        return signing.dumps({"at": task.a2a_status_at.isoformat(), "id": str(task.pk), "of": self.listing}, salt=self.salt)

    def read(self, token: str) -> tuple[datetime, uuid.UUID]:
        try:
            cursor = signing.loads(token, salt=self.salt)
            if cursor["of"] != self.listing:
                raise ValueError
            return datetime.fromisoformat(cursor["at"]), uuid.UUID(cursor["id"])
        except (signing.BadSignature, ValueError, KeyError, TypeError):
            raise InvalidParamsError(message=self.refused) from None
