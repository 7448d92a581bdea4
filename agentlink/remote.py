"""Remote A2A agents as tools: the client side of agentlink. An agent linked to a RemoteAgent (the
admin) has a tool `<name>__ask` (its argument: the message); the loop calls it as any tool and
never learns it is remote. A call sends the message to the remote agent with the `a2a-sdk` client
and reads its task until it is over or waits for a human there (input-required). Then its pending
calls become calls of our turn (chat.asked: cards "via <name>", decided by our policy and our
people), and once they are decided the decisions go to the remote task (agentlink.decisions'
shapes, each bound to the version the remote showed) and the reading goes on. Its answer is the
call's result. A Stop cancels the remote task; a remote that is down, slow or answers garbage is a
clear error for the model, and a task it leaves open is cancelled.

A remote's calls are named `<name>__<tool>` here (rules and routes name them so); they are never
tools of ours: the model cannot call one, and an edit of one is checked by the remote."""
import asyncio
import json
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.db import connection
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from approvals.policy.gate import RISKS
from chat.asked import MAX_ACTIONS, question_of
from chat.tools import InputRequired, ToolArgumentsError, ToolError, ToolSpec
from core.inputs import is_storable_value

from .models import ASK, HOPS_KEY, REMOTE_SEPARATOR, RemoteAgent, Task

logger = logging.getLogger(__name__)

State = pb.TaskState
MOVING = {State.TASK_STATE_SUBMITTED, State.TASK_STATE_WORKING, State.TASK_STATE_UNSPECIFIED}
MAX_MESSAGE = 20_000
MAX_RESULT = 50_000
MAX_ANSWER_BYTES = 5_000_000  # of any one answer (the card, a task): a flood is read no further
MAX_ARGUMENTS = 100_000  # characters of one call's arguments, as JSON (the model's own calls' cap)
MAX_ROUNDS = 10  # pauses relayed for one call: a remote pausing again and again (rules deciding at once) ends
POLL_FIRST, POLL_MOST = 0.1, 1.0
CANCEL_SECONDS = 10
ASKS = REMOTE_SEPARATOR + ASK
# How tests reach an A2A app in process (httpx.ASGITransport): None in production.
transport_for_tests: httpx.AsyncBaseTransport | None = None


class Unusable(ToolError):
    """The remote could not be used; `task_id` names a task it left open, which is cancelled."""

    def __init__(self, message: str, task_id: str = ""):
        super().__init__(message)
        self.task_id = task_id


def _never(*_args, **_kwargs):  # a ToolSpec's function: a remote call runs through run(), below
    raise NotImplementedError


@dataclass(frozen=True)
class RemoteAskSpec(ToolSpec):
    """`<name>__ask`: send a message to the remote agent, get its answer."""

    remote: RemoteAgent | None = None
    stoppable: bool = True  # a Stop while it reads the remote's task cancels that task

    @property
    def parameters(self) -> dict:
        return {
            "type": "object",
            "properties": {"message": {"type": "string", "description": f"What to ask {self.remote.name}, in words."}},
            "required": ["message"],
            "additionalProperties": False,
        }

    def validate(self, arguments: Any) -> dict:
        if not isinstance(arguments, dict) or set(arguments) != {"message"}:
            raise ToolArgumentsError(f'Arguments for {self.name} are {{"message": "<what to ask {self.remote.name}>"}}.')
        message = arguments["message"]
        if not isinstance(message, str) or not message.strip() or len(message) > MAX_MESSAGE:
            raise ToolArgumentsError(f"Invalid arguments for {self.name}: message is text of 1 to {MAX_MESSAGE} characters.")
        return {"message": message}

    def run(self, arguments: dict, context) -> str:
        opened = Opened(self.remote, context.started)
        hops = Task.hops_before(context.conversation_id) + 1  # this conversation's own A2A task, if an agent asked it
        return _talk(self.remote, lambda client: _start(client, self.remote, arguments["message"], opened, hops), opened)

    def resume(self, arguments: dict, context, state: dict, answer: dict) -> str:
        """Our people decided the remote's calls: send the decisions to its task, read on."""
        remote = _current(state)
        opened = Opened(remote, context.started)
        return _talk(remote, lambda client: _reply(client, remote, state, answer, opened), opened)

    def cancel(self, arguments: dict, context, state: dict) -> None:
        from .tasks import cancel_remote_task  # the task module imports this one

        if state.get("task_id") and state.get("remote"):
            cancel_remote_task.delay(state["remote"], state["task_id"])


def tools_for_agent(agent) -> list[ToolSpec]:
    """The agent's remote agents as tools (`<name>__ask` among its tools). No query for an agent that has none."""
    names = [name.removesuffix(ASKS) for name in agent.tools or [] if isinstance(name, str) and name.endswith(ASKS)]
    if not names:
        return []
    return [
        RemoteAskSpec(name=remote.tool_name, description=_description(remote), function=_never, arguments_model=None, risk="low", remote=remote)
        for remote in RemoteAgent.objects.filter(name__in=names, enabled=True).order_by("name")
    ]


def _description(remote: RemoteAgent) -> str:
    card = remote.card or {}
    said = str(card.get("description") or "")[:500]
    return (f"Ask {card.get('name') or remote.name}, a remote agent (A2A), to do something; returns its answer. "
            f"Its risky calls are decided by a human here first. {said}").strip()


def call_name(remote: RemoteAgent, tool: str) -> str:
    """How a remote's call is named here: `<name>__<tool>`, in the characters every provider accepts
    (a look-alike or invisible character is a `_`, so never the name a rule of ours names), and
    never `<name>__ask`, our tool that asks it (whose rules would then decide the remote's call)."""
    tool = re.sub(r"[^A-Za-z0-9_-]", "_", tool) or "call"
    return f"{remote.name}{REMOTE_SEPARATOR}{tool}{'_there' if tool == ASK else ''}"[:64]


def _current(state: dict) -> RemoteAgent:
    remote = RemoteAgent.objects.filter(pk=state.get("remote")).first()
    if remote is None or not remote.enabled:
        raise ToolError("That remote agent was removed or disabled by an admin meanwhile: the decisions were not sent.")
    return remote


# --- Talking to the remote -------------------------------------------------------------------------


class Opened:
    """The remote task an exchange reads, once it has one, recorded on our call as soon as it is
    known (ToolContext.started): a Stop cancels it from there. A call stopped before that finds
    out here, and the task is cancelled at once."""

    def __init__(self, remote: RemoteAgent, started: Callable[[dict], bool] | None = None):
        self.remote, self.started, self.task_id = remote, started, ""

    async def record(self, task: pb.Task) -> None:
        self.task_id = task.id
        state = {"remote": self.remote.pk, "task_id": task.id, "context_id": task.context_id}
        if self.started is not None and not await asyncio.to_thread(_closing, self.started, state):
            raise Unusable(f"Stopped here while {self.remote.name} worked on it.", task.id)


def _closing(started: Callable[[dict], bool], state: dict) -> bool:
    try:
        return started(state)
    finally:
        connection.close()  # this thread's own, which ends with the exchange


def _talk(remote: RemoteAgent, work, opened: Opened) -> str:
    """Run one exchange with the remote (`work(client)`), within its timeout; what goes wrong is a
    ToolError the model can read, and a task it leaves open (`opened`) is cancelled."""
    try:
        return asyncio.run(_session(remote, work))
    except Unusable as exc:
        raise ToolError(f"{exc} {_cancelled(remote, exc.task_id) if exc.task_id else 'Nothing was done here.'}") from None
    except (InputRequired, ToolError):
        raise
    except Exception as exc:  # noqa: BLE001  (whatever a remote does is its problem, told to the model)
        cause = exc.__cause__ if isinstance(exc, A2AError) and isinstance(exc.__cause__, httpx.HTTPError) else exc
        if isinstance(cause, (httpx.TimeoutException, TimeoutError)):
            said = f"{remote.name} did not answer within {remote.timeout_seconds} s."
        elif isinstance(cause, TooLarge):
            said = f"{remote.name} answered {cause}: not read further."
        elif isinstance(cause, httpx.HTTPError):
            said = f"{remote.name} could not be reached ({cause.__class__.__name__})."
        elif isinstance(exc, A2AError):
            said = f"{remote.name} answered with an error: {_shown(getattr(exc, 'message', '') or str(exc))}"
        else:
            logger.warning("remote agent %s: %r", remote.name, exc)
            said = f"{remote.name} answered something that is not A2A ({exc.__class__.__name__})."
        task_id = opened.task_id
        raise ToolError(f"{said} {_cancelled(remote, task_id) if task_id else 'Nothing was done here.'}") from None


def _cancelled(remote: RemoteAgent, task_id: str) -> str:
    if cancel_task(remote, task_id):
        return f"Its task {task_id} was cancelled: nothing more happens there."
    return f"Its task {task_id} could not be cancelled: it may still go on there."


async def _session(remote: RemoteAgent, work):
    """`work(client)` after reading the card, all within the remote's timeout (a remote dribbling
    its answers a byte at a time included)."""

    async def exchange():
        card = await _card(http, remote)
        return await work(ClientFactory(ClientConfig(httpx_client=http, streaming=False, polling=True)).create(card))

    async with _http(remote, remote.timeout_seconds) as http:
        return await asyncio.wait_for(exchange(), remote.timeout_seconds)


def _http(remote: RemoteAgent, seconds: float) -> httpx.AsyncClient:
    """Our token to the remote's origin only (redirects are not followed); its answers capped."""
    headers = {"Authorization": f"Bearer {remote.token}"} if remote.token else {}
    timeout = httpx.Timeout(seconds, connect=min(seconds, 10))
    return httpx.AsyncClient(headers=headers, timeout=timeout, transport=transport_for_tests, follow_redirects=False,
                             event_hooks={"response": [_capped]})


class TooLarge(httpx.DecodingError):
    """An answer longer than MAX_ANSWER_BYTES."""


class _Capped(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream):
        self.stream = stream

    async def __aiter__(self):
        seen = 0
        async for chunk in self.stream:
            seen += len(chunk)
            if seen > MAX_ANSWER_BYTES:
                raise TooLarge(f"more than {MAX_ANSWER_BYTES} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


async def _capped(response: httpx.Response) -> None:
    """Called before the body is read: it is read through the cap."""
    response.stream = _Capped(response.stream)


async def _card(http: httpx.AsyncClient, remote: RemoteAgent) -> pb.AgentCard:
    """The remote's card, whose JSON-RPC interface must be where the card is (same scheme, host and
    port): the token goes nowhere else."""
    response = await http.get(remote.card_url)
    if response.status_code != 200:
        raise Unusable(f"{remote.name}'s card could not be read (HTTP {response.status_code} at {remote.card_url}).")
    try:
        card = parse_agent_card(response.json())
    except Exception:  # noqa: BLE001  (not JSON, not a card)
        raise Unusable(f"{remote.name}'s card URL answered something that is not an A2A agent card.") from None
    interfaces = [i for i in card.supported_interfaces if i.protocol_binding == TransportProtocol.JSONRPC.value]
    if not interfaces:
        raise Unusable(f"{remote.name}'s card offers no JSON-RPC interface.")
    if any(_origin(i.url) != _origin(remote.card_url) for i in interfaces):
        raise Unusable(f"{remote.name}'s card names an endpoint elsewhere than the card ({interfaces[0].url}): not called.")
    return card


def _origin(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme)


async def _start(client, remote: RemoteAgent, text: str, opened: Opened, hops: int) -> str:
    message = pb.Message(role=pb.Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[pb.Part(text=text)])
    message.metadata.update({HOPS_KEY: hops})  # a hitl remote refuses a chain of agents past its limit
    return await _follow(client, remote, await _sent(client, message), opened)


async def _reply(client, remote: RemoteAgent, state: dict, answer: dict, opened: Opened) -> str:
    decisions, answers, edits = _decisions(state, answer)
    message = pb.Message(role=pb.Role.ROLE_USER, message_id=uuid.uuid4().hex, task_id=state["task_id"], context_id=state["context_id"])
    for data in [{"decisions": decisions}] * bool(decisions) + [{"answers": answers}] * bool(answers) + edits:
        part = pb.Part(media_type="application/json")
        part.data.struct_value.update(data)
        message.parts.append(part)
    opened.task_id = state["task_id"]
    try:
        task = await _sent(client, message)
    except A2AError as exc:
        if isinstance(exc.__cause__, httpx.HTTPError):
            raise
        said = getattr(exc, "message", "") or str(exc)
        raise Unusable(f"{remote.name} refused the decisions: {_shown(said)}", state["task_id"]) from None
    decided = set(state.get("decided", [])) | {entry["id"] for entry in state["pending"]}
    return await _follow(client, remote, task, opened, decided=decided, rounds=state.get("rounds", 1))


async def _sent(client, message: pb.Message):
    """The task (or a direct answer, as a Message) that sending `message` returns."""
    events = [event async for event in client.send_message(pb.SendMessageRequest(message=message))]
    if not events:
        raise Unusable("The remote answered the message with nothing.")
    last = events[-1]
    if last.HasField("task"):
        return last.task
    if last.HasField("message"):
        return last.message
    raise Unusable("The remote answered the message with neither a task nor a message.")


async def _follow(client, remote: RemoteAgent, task, opened: Opened, *, decided: set = frozenset(), rounds: int = 0) -> str:
    """Read the task until it stops moving: its answer, or InputRequired with its pending calls."""
    if isinstance(task, pb.Message):
        return _limited(_text(task.parts)) or f"{remote.name} answered with no text."
    if not task.id:
        raise Unusable(f"{remote.name} answered with a task without an id.")
    await opened.record(task)
    delay = POLL_FIRST
    while task.status.state in MOVING:
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, POLL_MOST)
        task = await client.get_task(pb.GetTaskRequest(id=task.id, history_length=0))
    return _outcome(remote, task, decided, rounds)


def _outcome(remote: RemoteAgent, task: pb.Task, decided: set, rounds: int) -> str:
    state, said = task.status.state, _text(task.status.message.parts)
    if state == State.TASK_STATE_COMPLETED:
        answer = "\n".join(filter(None, (_text(artifact.parts) for artifact in task.artifacts))) or said
        return _limited(answer) or f"{remote.name} finished without an answer."
    if state == State.TASK_STATE_INPUT_REQUIRED:
        if rounds >= MAX_ROUNDS:
            raise Unusable(f"{remote.name} paused {rounds + 1} times in one call; at most {MAX_ROUNDS} pauses are relayed.", task.id)
        pending = _pending(remote, task)
        if again := [entry["id"] for entry in pending if entry["id"] in decided]:
            raise ToolError(
                f"{remote.name} still waits for its own approvers of #{', #'.join(str(i) for i in again)} (task {task.id}): "
                "our decision is counted there, and the call runs once they approve it."
            )
        raise InputRequired(None, _state(remote, task, pending, decided, rounds + 1), [entry["asked"] for entry in pending])
    if state == State.TASK_STATE_FAILED:
        raise ToolError(f"{remote.name} failed: {_shown(said) or 'it gave no reason.'}")
    if state == State.TASK_STATE_CANCELED:
        raise ToolError(f"{remote.name} cancelled its task: {_shown(said) or 'it gave no reason.'}")
    name = pb.TaskState.Name(state).removeprefix("TASK_STATE_").lower() if state in pb.TaskState.values() else str(state)
    raise Unusable(f"{remote.name} stopped in a state this app does not take ({name}): {_shown(said)}", task.id)


def _state(remote: RemoteAgent, task: pb.Task, pending: list[dict], decided: set, rounds: int) -> dict:
    return {
        "remote": remote.pk, "task_id": task.id, "context_id": task.context_id, "decided": sorted(decided), "rounds": rounds,
        "pending": [{key: value for key, value in entry.items() if key != "asked"} for entry in pending],
    }


def _pending(remote: RemoteAgent, task: pb.Task) -> list[dict]:
    """The calls and questions a remote's pause lists (agentlink.runs.pause_parts' shapes), each as
    what we keep to answer it and what we ask here (`asked`, chat.asked's shape)."""
    data = [part.get("data") for part in MessageToDict(task.status.message).get("parts", []) if "data" in part]
    if not is_storable_value(data):  # a NUL (JSON lets it through; PostgreSQL refuses it)
        raise Unusable(f"{remote.name}'s pause holds a NUL character, which is not text.", task.id)
    pending = []
    try:
        for item in data:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "tool_approval":
                pending += [_action(remote, request) for request in _listed(item.get("action_requests"))]
            elif item.get("type") == "ask_user_request":
                pending += [_question(remote, asked) for asked in _listed(item.get("questions"))]
    except _Unreadable as exc:
        raise Unusable(f"{remote.name}'s pause {exc}.", task.id) from None
    if len(pending) > MAX_ACTIONS:
        raise Unusable(f"{remote.name} asks for {len(pending)} decisions at once; at most {MAX_ACTIONS} are relayed.", task.id)
    if not pending:
        raise Unusable(
            f"{remote.name} waits for input this app cannot relay (no tool_approval or ask_user_request part): "
            f"{_shown(_text(task.status.message.parts)) or 'it said nothing.'}", task.id,
        )
    return pending


class _Unreadable(ValueError):
    pass


def _listed(value) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise _Unreadable("lists its calls in a shape this app does not read")
    return value


def _id(value) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _Unreadable("names a call without an id")
    return value


def _action(remote: RemoteAgent, request: dict) -> dict:
    tool = request.get("name") if isinstance(request.get("name"), str) else ""
    arguments = request.get("args") if isinstance(request.get("args"), dict) else {}
    if len(json.dumps(arguments, ensure_ascii=False)) > MAX_ARGUMENTS:
        raise _Unreadable(f"asks about a call whose arguments are larger than {MAX_ARGUMENTS} characters")
    risk = request.get("risk") if request.get("risk") in RISKS else "medium"
    preview = request.get("preview") if isinstance(request.get("preview"), dict) else None
    if request.get("kind") == "plan" and isinstance(request.get("plan"), dict):
        steps = [str(step.get("action", "")) for step in request["plan"].get("steps") or [] if isinstance(step, dict)]
        preview = {"kind": "text", "text": "\n".join(f"{i}. {step}" for i, step in enumerate(steps, start=1))}
    shown = f"Via {remote.name} (a remote A2A agent): {tool}\n\n"
    preview = {"kind": preview.get("kind", "text"), "text": shown + str(preview.get("text", ""))} if preview else {
        "kind": "text", "text": shown + json.dumps(arguments, ensure_ascii=False, indent=2),
    }
    description = str(request.get("description") or "")[:1000]
    return {
        "id": _id(request.get("id")), "kind": "action", "shown_hash": str(request.get("shown_hash") or "")[:128],
        "confirmation": str(request.get("confirmation_hint") or "")[:200] if request.get("confirmation_required") else "",
        "asked": {
            "name": call_name(remote, tool), "arguments": arguments, "risk": risk, "preview": preview,
            "reason": f"{remote.name}, a remote agent, asks a human before it runs {tool or 'a call'}"
            + (f" (its reason: “{description}”)." if description else "."),
        },
    }


def _question(remote: RemoteAgent, asked: dict) -> dict:
    text = f"{remote.name} (a remote A2A agent) asks: {str(asked.get('text') or '').strip() or 'some input'}"
    return {
        "id": _id(asked.get("id")), "kind": "question", "shown_hash": str(asked.get("shown_hash") or "")[:128], "confirmation": "",
        "asked": {"question": question_of(text, asked)},
    }


def _decisions(state: dict, answer: dict) -> tuple[list, list, list]:
    """Our decisions as the remote takes them (agentlink.decisions' shapes): approvals and denials by
    id, answers, and each edit as seed 004's `approval_response` "modified" (the remote checks it
    as its every edit), each bound to the version the remote showed."""
    decisions, answers, edits = [], [], []
    given = answer.get("decisions") if answer.get("action") == "decide" else None
    if not isinstance(given, list) or len(given) != len(state.get("pending", [])):
        raise ToolError("The decisions do not match the calls the remote asked about: nothing was sent.")
    for entry, decision in zip(state["pending"], given):
        verb, by = decision.get("decision"), decision.get("by") or "a human"
        if entry["kind"] == "question":
            if verb == "answer":
                answers.append({"id": entry["id"], "answer": decision.get("value"), "shown_hash": entry["shown_hash"]})
            else:
                answers.append({"id": entry["id"], "decline": True, "reason": f"{verb} by {by} ({decision.get('reason') or 'no reason'})"[:2000],
                                "shown_hash": entry["shown_hash"]})
            continue
        sent = {"id": entry["id"], "shown_hash": entry["shown_hash"]}
        if verb == "approve" and decision.get("arguments") is None:
            decisions.append(sent | {"decision_type": "approve"} | ({"confirmation": entry["confirmation"]} if entry["confirmation"] else {}))
        elif verb == "approve":
            edits.append(sent | {"type": "approval_response", "decision": "modified", "modified_input": decision["arguments"]}
                         | ({"confirmation": entry["confirmation"]} if entry["confirmation"] else {}))
        else:
            reason = f"{'Rejected' if verb == 'reject' else verb.capitalize()} by {by}" + (f": {decision['reason']}" if decision.get("reason") else "")
            decisions.append(sent | {"decision_type": "deny", "reason": reason[:2000]})
    return decisions, answers, edits


def cancel_task(remote: RemoteAgent, task_id: str) -> bool:
    """Cancel the remote's task (A2A tasks/cancel), best effort: False if that failed (logged)."""

    async def cancel(client):
        await client.cancel_task(pb.CancelTaskRequest(id=task_id))

    try:
        asyncio.run(_session(_quick(remote), cancel))
        return True
    except Exception as exc:  # noqa: BLE001  (over already, or unreachable: logged)
        logger.warning("cancelling task %s of remote agent %s failed: %r", task_id, remote.name, exc)
        return False


def _quick(remote: RemoteAgent) -> RemoteAgent:
    quick = RemoteAgent(pk=remote.pk, name=remote.name, card_url=remote.card_url, token=remote.token)
    quick.timeout_seconds = min(remote.timeout_seconds, CANCEL_SECONDS)
    return quick


def refresh(remote: RemoteAgent) -> dict:
    """Read the remote's card now and keep it (its name and description describe its tool here)."""
    try:
        card = asyncio.run(_card_only(remote))
    except Exception as exc:  # noqa: BLE001
        error = str(exc) if isinstance(exc, ToolError) else f"{exc.__class__.__name__}: the card could not be read."
        RemoteAgent.objects.filter(pk=remote.pk).update(refresh_error=error[:2000], refreshed_at=timezone.now())
        raise ToolError(error) from None
    remote.card, remote.refresh_error, remote.refreshed_at = card, "", timezone.now()
    RemoteAgent.objects.filter(pk=remote.pk).update(card=card, refresh_error="", refreshed_at=remote.refreshed_at)
    return card


async def _card_only(remote: RemoteAgent) -> dict:
    seconds = min(remote.timeout_seconds, 10)
    async with _http(remote, seconds) as http:
        return MessageToDict(await asyncio.wait_for(_card(http, remote), seconds))


def _text(parts) -> str:
    return "\n".join(part.text for part in parts if part.WhichOneof("content") == "text").strip()


def _limited(text: str) -> str:
    return text if len(text) <= MAX_RESULT else text[: MAX_RESULT - 1] + "…"


def _shown(text: str) -> str:
    return str(text).strip()[:1000]
