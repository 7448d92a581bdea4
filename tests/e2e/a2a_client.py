"""The real `a2a-sdk` client, for one agent as one user (its API token), driven from sync tests."""
import asyncio
import time

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from chat.models import ApiToken

State = pb.TaskState


class A2A:
    """The SDK's client for one agent, as one user (its API token), driven from sync tests."""

    def __init__(self, base_url: str, user, slug: str = "demo", *, streaming: bool = False):
        self.base_url, self.slug, self.streaming = base_url, slug, streaming
        self.key = ApiToken.issue(user)

    def _run(self, work):
        async def go():
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {self.key}"}, timeout=30) as http:
                config = ClientConfig(httpx_client=http, streaming=self.streaming)
                client = await create_client(f"{self.base_url}/a2a/{self.slug}/", config)
                return await work(client)

        return asyncio.run(go())

    def send(self, *parts, task_id: str = "", context_id: str = "") -> list:
        """Send a message; every event the client yields (a blocking send yields the one task)."""
        message = pb.Message(role=pb.Role.ROLE_USER, message_id=f"m-{id(parts)}-{len(parts)}", task_id=task_id, context_id=context_id)
        for part in parts:
            message.parts.append(pb.Part(text=part) if isinstance(part, str) else _data_part(part))

        async def work(client):
            return [event async for event in client.send_message(pb.SendMessageRequest(message=message))]

        return self._run(work)

    def task(self, *parts, **ids) -> pb.Task:
        """A blocking send's task, once it has stopped moving. A2A lets a blocking send answer with a
        task still working (ours does after HITL_A2A_WAIT_SECONDS); a client then reads it again."""
        [event] = self.send(*parts, **ids)
        task = event.task
        deadline = time.monotonic() + 20
        while task.status.state in (State.TASK_STATE_SUBMITTED, State.TASK_STATE_WORKING) and time.monotonic() < deadline:
            time.sleep(0.05)
            task = self.get(task.id)
        return task

    def get(self, task_id: str) -> pb.Task:
        return self._run(lambda client: client.get_task(pb.GetTaskRequest(id=task_id)))

    def timed_get(self, task_id: str) -> tuple[pb.Task, float]:
        """GetTask, and how long the call itself took (the client's set-up, card included, not counted)."""

        async def work(client):
            began = time.monotonic()
            task = await client.get_task(pb.GetTaskRequest(id=task_id))
            return task, time.monotonic() - began

        return self._run(work)

    def cancel(self, task_id: str) -> pb.Task:
        return self._run(lambda client: client.cancel_task(pb.CancelTaskRequest(id=task_id)))

    def list(self, **fields) -> pb.ListTasksResponse:
        return self._run(lambda client: client.list_tasks(pb.ListTasksRequest(**fields)))

    def set_push(self, task_id: str, url: str, token: str = "", config_id: str = "") -> pb.TaskPushNotificationConfig:
        config = pb.TaskPushNotificationConfig(task_id=task_id, url=url, token=token, id=config_id)
        return self._run(lambda client: client.create_task_push_notification_config(config))

    def push_configs(self, task_id: str) -> "list[pb.TaskPushNotificationConfig]":
        request = pb.ListTaskPushNotificationConfigsRequest(task_id=task_id)
        return [*self._run(lambda client: client.list_task_push_notification_configs(request)).configs]

    def delete_push(self, task_id: str, config_id: str) -> None:
        request = pb.DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        return self._run(lambda client: client.delete_task_push_notification_config(request))

    def card(self) -> dict:
        response = httpx.get(f"{self.base_url}/a2a/{self.slug}/.well-known/agent-card.json", headers={"Authorization": f"Bearer {self.key}"})
        return response


def _data_part(data: dict) -> pb.Part:
    part = pb.Part()
    part.data.struct_value.update(data)
    return part


def data_parts(task: pb.Task) -> dict:
    parts = {part["data"]["type"]: part["data"] for part in MessageToDict(task.status.message).get("parts", []) if "data" in part}
    assert parts, f"no data parts in {pb.TaskState.Name(task.status.state)} task: {MessageToDict(task)}"
    return parts


def text_of(task: pb.Task) -> str:
    return "".join(part.text for part in task.status.message.parts)


def answer_of(task: pb.Task) -> str:
    return "".join(part.text for artifact in task.artifacts if artifact.name == "answer" for part in artifact.parts)
