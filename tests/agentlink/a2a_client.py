"""Playing an A2A client in process, for the agentlink tests: a task started and its pause sent as the
handler does, decisions sent as data parts, the task read back as the server sends it, and calls to
agentlink's ASGI app (no server). The loop runs inline with the scripted model (eager Celery)."""
import httpx
import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as pb
from agentlink import decisions, runs
from agentlink.app import application
from agentlink.models import Task
from approvals.models import Approval
from approvals.services import decide
from chat import services
from chat.models import Conversation
from chat.tools import arguments_hash
from tests.conftest import asgi_call, pending_approvals

State = pb.TaskState


def a2a_task(user, agent, text: str, conversation=None) -> Task:
    """A task started as the A2A handler starts one (the loop has run by the time it returns), its
    pause, if any, sent to the client as the blocking answer sends it (recorded as shown)."""
    task = runs.start(user=user, agent=agent, text=text, conversation=conversation)
    sent(task)
    return task


def sent(task: Task) -> pb.Task:
    """The task as the server sends it now (GetTask, a stream's update): a pause it lists is recorded."""
    reading = runs.read(task)
    runs.note_shown(task, reading)
    return runs.as_proto(task, reading)


def message(*parts) -> pb.Message:
    """A user message of text parts (str) and data parts (anything else, as JSON)."""
    built = pb.Message(role=pb.Role.ROLE_USER, message_id="m-1")
    for part in parts:
        if isinstance(part, str):
            built.parts.append(pb.Part(text=part))
        else:
            data = pb.Part()
            if part == {}:
                data.data.struct_value.SetInParent()  # an explicit empty object (update({}) sets nothing)
            else:
                data.data.struct_value.update(part)
            built.parts.append(data)
    return built


def send(task: Task, user, *parts, pending=None) -> int:
    """decisions.apply as the handler calls it: on what is pending now, and what the last pause sent
    listed. Returns how many calls it decided."""
    return apply(task, user, *parts, pending=pending).decided


def apply(task: Task, user, *parts, pending=None) -> decisions.Outcome:
    reading = runs.read(task)
    now = (reading.pending or []) if pending is None else pending
    return decisions.apply(conversation=task.conversation, user=user, message=message(*parts), pending=now,
                           shown=runs.shown_to_client(task))


def refused(task: Task, user, *parts, pending=None) -> decisions.Refused:
    with pytest.raises(decisions.Refused) as caught:
        send(task, user, *parts, pending=pending)
    return caught.value


def statuses(task: Task) -> list[str]:
    return list(Approval.objects.filter(conversation_id=task.conversation_id).order_by("pk").values_list("status", flat=True))


def data_parts(proto: pb.Task) -> dict:
    return {part["data"]["type"]: part["data"] for part in MessageToDict(proto.status.message).get("parts", []) if "data" in part}


def snapshot(task: Task) -> pb.Task:
    return runs.as_proto(task, runs.read(task))


def answer_of(proto: pb.Task) -> str:
    """The answer artifact's text (the tool calls and results are artifacts of their own)."""
    return "".join(part.text for artifact in proto.artifacts if artifact.name == "answer" for part in artifact.parts)


def held_email_then_approved_on_the_page(task: Task, user) -> Approval:
    """The issue's sequence: while the pause the client was sent (write_file) waits, the owner types
    an email request in the chat (held until the call is decided), then approves the write on the
    page; the agent then asks for the email in the same turn. Returns the email's approval."""
    [write] = pending_approvals(task.conversation)
    services.post_message(conversation=Conversation.objects.get(pk=task.conversation_id), user=user,
                          content="email mallory@outside.test about the keys")
    decide(write.pk, user=user, approve=True, via="chat", shown_hash=write.shown_hash)
    [email] = pending_approvals(task.conversation)
    assert email.tool_call.name == "send_email"
    return email


def edit_as_if_by_an_approver(approval: Approval, arguments: dict) -> None:
    """An edit left pending for another decider, as approvals.services.approve_edited stores one."""
    Approval.objects.filter(pk=approval.pk).update(
        edited_arguments=arguments, edited_arguments_hash=arguments_hash(arguments), edited_at=timezone.now(),
        edited_by=User.objects.create_user("approver"),
    )


def call(method: str, path: str, *, token: str | None = None, headers: dict | None = None, **kwargs) -> httpx.Response:
    """One request to agentlink's ASGI app, as a client would send it (no server)."""
    return asgi_call(application, method, path, token=token, headers=headers, **kwargs)


def rpc(token: str, method: str, params: dict, *, slug: str = "demo", version: str | None = "1.0") -> dict:
    headers = {"A2A-Version": version} if version else {}
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    response = call("POST", f"/a2a/{slug}/", token=token, headers=headers, json=body)
    assert response.status_code == 200, response.text
    return response.json()


CARD = "/a2a/demo/.well-known/agent-card.json"
