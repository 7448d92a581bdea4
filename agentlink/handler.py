"""The A2A request handler: the SDK's JSON-RPC dispatcher calls it, already authenticated (the
caller's user and the agent are in the call context, see agentlink.app). Thin: the rows are read
and written by agentlink.runs and agentlink.decisions, through `database_sync_to_async`.

The run happens in a Celery worker, not here, so this is the SDK's abstract RequestHandler rather
than its DefaultRequestHandler (which runs an AgentExecutor inside the request). A blocking send
and a stream wait for the task to move by listening to the conversation's channel-layer group,
the one the chat's pushes go to, and read the rows again at least every second (pushes are best
effort)."""
import asyncio
import logging
import time
from collections.abc import AsyncGenerator

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from approvals.models import Approval
from chat import services as chat_services
from chat.quotas import QuotaExceeded
from hitl.live import conversation_group

from . import decisions, runs

logger = logging.getLogger(__name__)

State = pb.TaskState
MOVING = {State.TASK_STATE_SUBMITTED, State.TASK_STATE_WORKING}
RECHECK_SECONDS = 1.0
PAGE_SIZE, MAX_PAGE_SIZE = 50, 100
MAX_FILTERED = 500


class AgentHandler(RequestHandler):
    """One handler for every agent: the agent and the user come with each call's context."""

    @validate_request_params
    async def on_message_send(self, params: pb.SendMessageRequest, context: ServerCallContext) -> pb.Task:
        task = await self._receive(params, context)
        if params.configuration.return_immediately:
            return await self._snapshot(task)
        deadline = time.monotonic() + settings.HITL_A2A_WAIT_SECONDS
        async for proto in self._follow(task, deadline=deadline):
            last = proto
        return last

    @validate_request_params
    async def on_message_send_stream(self, params: pb.SendMessageRequest, context: ServerCallContext) -> AsyncGenerator:
        task = await self._receive(params, context)
        async for event in self._events(task):
            yield event

    @validate_request_params
    async def on_subscribe_to_task(self, params: pb.SubscribeToTaskRequest, context: ServerCallContext) -> AsyncGenerator:
        task = await self._task(params.id, context)
        async for event in self._events(task):
            yield event

    @validate_request_params
    async def on_get_task(self, params: pb.GetTaskRequest, context: ServerCallContext) -> pb.Task:
        task = await self._task(params.id, context)
        history = params.history_length if params.HasField("history_length") else None
        return await self._snapshot(task, history_length=history)

    @validate_request_params
    async def on_list_tasks(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        return await database_sync_to_async(_list_tasks)(params, context.state["hitl_user"], context.state["hitl_agent"])

    @validate_request_params
    async def on_cancel_task(self, params: pb.CancelTaskRequest, context: ServerCallContext) -> pb.Task:
        task = await self._task(params.id, context)
        await database_sync_to_async(_cancel)(task, context.state["hitl_user"])
        return await self._snapshot(task)

    async def on_create_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(self, params, context):
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(self, params, context):
        raise UnsupportedOperationError(message="This agent has no extended card: its card is the whole of it.")

    async def _task(self, task_id: str, context: ServerCallContext) -> runs.Task:
        task = await database_sync_to_async(runs.task_for)(context.state["hitl_user"], context.state["hitl_agent"], task_id)
        if task is None:  # unknown, or another user's: the same answer
            raise TaskNotFoundError
        return task

    async def _receive(self, params: pb.SendMessageRequest, context: ServerCallContext) -> runs.Task:
        user, agent = context.state["hitl_user"], context.state["hitl_agent"]
        message = params.message
        if message.task_id:
            task = await self._task(message.task_id, context)
            if message.context_id and message.context_id != str(task.conversation_id):
                raise InvalidParamsError(message="That task belongs to another contextId.")
            await database_sync_to_async(_continue)(task, user, message)
            return task
        try:
            return await database_sync_to_async(_start)(user, agent, message)
        except runs.Busy as exc:
            raise InvalidRequestError(message=str(exc)) from None

    async def _snapshot(self, task: runs.Task, *, history_length: int | None = None) -> pb.Task:
        return await database_sync_to_async(_snapshot)(task, history_length)

    async def _follow(self, task: runs.Task, *, deadline: float) -> AsyncGenerator[pb.Task]:
        """The task each time it changes, until it stops moving (paused, over) or the deadline."""
        layer, channel = get_channel_layer(), None
        try:
            if layer is not None:
                channel = await layer.new_channel()
                await layer.group_add(conversation_group(task.conversation_id), channel)
        except Exception as exc:  # Redis down: read the rows every second instead
            logger.warning("a2a: no channel layer to follow %s: %s", task.pk, exc)
            channel = None
        try:
            seen = None
            while True:
                proto = await self._snapshot(task, history_length=0)
                key = (proto.status.state, proto.status.message.SerializeToString())
                if key != seen:
                    seen = key
                    yield proto
                if proto.status.state not in MOVING or time.monotonic() >= deadline:
                    return
                await _wait(layer, channel, min(RECHECK_SECONDS, max(deadline - time.monotonic(), 0.01)))
        finally:
            if channel is not None:
                try:
                    await layer.group_discard(conversation_group(task.conversation_id), channel)
                except Exception:
                    pass

    async def _events(self, task: runs.Task) -> AsyncGenerator:
        """A stream: the task, then a status update at each change, the answer as an artifact, and
        the end once the task waits for a human or is over."""
        deadline = time.monotonic() + settings.HITL_A2A_STREAM_SECONDS
        first = True
        async for proto in self._follow(task, deadline=deadline):
            if first:
                first = False
                yield proto
                continue
            if proto.status.state == State.TASK_STATE_COMPLETED:
                for artifact in proto.artifacts:
                    yield pb.TaskArtifactUpdateEvent(
                        task_id=proto.id, context_id=proto.context_id, artifact=artifact, last_chunk=True
                    )
            yield pb.TaskStatusUpdateEvent(task_id=proto.id, context_id=proto.context_id, status=proto.status)


async def _wait(layer, channel, seconds: float) -> None:
    if channel is None:
        await asyncio.sleep(seconds)
        return
    try:
        await asyncio.wait_for(layer.receive(channel), timeout=seconds)
    except asyncio.TimeoutError:
        pass
    except Exception:  # the layer lost Redis: keep reading the rows
        await asyncio.sleep(seconds)


def _text(message: pb.Message) -> str:
    return "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text").strip()


def _start(user, agent, message: pb.Message) -> runs.Task:
    conversation = None
    if message.context_id:
        conversation = runs.conversation_for(user, agent, message.context_id)
        if conversation is None:
            raise TaskNotFoundError(message="Context not found (contextId).")
    if any(part.WhichOneof("content") != "text" for part in message.parts):
        raise InvalidParamsError(message="A new task starts with text parts only: decisions go to the task that asked for them (taskId).")
    try:
        return runs.start(user=user, agent=agent, text=_text(message), conversation=conversation)
    except (chat_services.InvalidMessage, QuotaExceeded, chat_services.NotOwner) as exc:
        raise InvalidParamsError(message=str(exc)) from None
    except chat_services.UnknownAgent:
        raise TaskNotFoundError(message="Unknown agent.") from None


def _continue(task: runs.Task, user, message: pb.Message) -> None:
    """A message on an existing task: decisions for its pause. A task that is working, or over,
    takes none (the next turn of the context is a message without taskId)."""
    reading = runs.read(task)
    if reading.state != State.TASK_STATE_INPUT_REQUIRED:
        try:
            decisions.refuse_decided(conversation=task.conversation, message=message)
        except decisions.Refused as exc:
            raise InvalidParamsError(message=exc.message, data=exc.data) from None
        name = pb.TaskState.Name(reading.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
        after = "send a new message with its contextId and no taskId" if reading.state in runs.TERMINAL else "wait until it asks"
        raise InvalidRequestError(message=f"Task {task.pk} is {name}: it takes no decision now; {after}.")
    try:
        decisions.apply(conversation=task.conversation, user=user, message=message, pending=reading.pending)
    except decisions.Refused as exc:
        raise InvalidParamsError(message=exc.message, data=exc.data) from None
    except (chat_services.InvalidMessage, QuotaExceeded, chat_services.NotOwner) as exc:
        raise InvalidParamsError(message=str(exc)) from None
    except chat_services.UnknownAgent:
        raise TaskNotFoundError(message="Unknown agent.") from None


def _snapshot(task: runs.Task, history_length: int | None) -> pb.Task:
    return runs.as_proto(task, runs.read(task), history_length=history_length)


def _cancel(task: runs.Task, user) -> None:
    reading = runs.read(task)
    if reading.state in runs.TERMINAL:
        raise TaskNotCancelableError(message=f"Task {task.pk} is over; there is nothing to cancel.")
    runs.Task.objects.filter(pk=task.pk).update(canceled=True)
    task.canceled = True
    chat_services.stop_conversation(conversation=task.conversation, user=user, via=Approval.Via.A2A)


def _list_tasks(params: pb.ListTasksRequest, user, agent) -> pb.ListTasksResponse:
    tasks = runs.visible_tasks(user, agent).order_by("-created_at", "-pk")
    if params.context_id:
        key = runs.parse_id(params.context_id)
        tasks = tasks.filter(conversation_id=key) if key else tasks.none()
    size = min(params.page_size, MAX_PAGE_SIZE) if params.page_size > 0 else PAGE_SIZE
    try:
        offset = int(params.page_token or 0)
        if offset < 0:
            raise ValueError
    except ValueError:
        raise InvalidParamsError(message="pageToken is the nextPageToken of an earlier page.") from None
    history = params.history_length if params.HasField("history_length") else 0
    filtered = bool(params.status) or params.HasField("status_timestamp_after")
    if not filtered:  # a page straight from the database
        total = tasks.count()
        page = [runs.as_proto(task, runs.read(task), history_length=history) for task in tasks[offset:offset + size]]
    else:  # states are read, not stored: filter the newest MAX_FILTERED tasks by what they are now
        protos = []
        for task in tasks[:MAX_FILTERED]:
            proto = runs.as_proto(task, runs.read(task), history_length=history)
            if params.status and proto.status.state != params.status:
                continue
            if params.HasField("status_timestamp_after") and proto.status.timestamp.ToDatetime() <= params.status_timestamp_after.ToDatetime():
                continue
            protos.append(proto)
        total, page = len(protos), protos[offset:offset + size]
    following = str(offset + size) if offset + size < total else ""
    return pb.ListTasksResponse(tasks=page, next_page_token=following, page_size=size, total_size=total)
