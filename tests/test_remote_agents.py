"""Remote A2A agents as tools (agentlink.remote), in process: our own A2A app is the remote (httpx's
ASGI transport, the loop inline with eager Celery, the scripted model on both sides). The outer
agent's `docs__ask` sends a message to the `docs` agent over A2A; the call that waits for a human
there is a card here, "via docs", decided by our policy and our people; the decision goes to the
remote task, and its answer back to our model. A Stop cancels the remote task; a remote that is
down, slow or answers garbage is a clear error for the model, and nothing is lost.
tests/e2e/test_remote_a2a_e2e.py drives the same across two stacks, in Chromium."""
import json

import httpx
import pytest
from django.contrib.auth.models import User

from agentlink import remote as remote_module
from agentlink.app import application
from agentlink.models import RemoteAgent, Task
from approvals.models import Approval
from approvals.services import decide
from chat import services
from chat.models import Agent, ApiToken, Conversation, ToolCall
from chat.tools import registry
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)

Status = ToolCall.Status
CARD_URL = "http://localhost/a2a/docs/.well-known/agent-card.json"


@pytest.fixture
def docs_agent(agent):
    """The remote: another agent of this site, whose write_file waits for a human."""
    return Agent.objects.create(
        slug="docs", name="Docs agent", model="scripted/demo", tools=agent.tools, require_approval=["write_file", "delete_file"],
        open_to_everyone=True,
    )


@pytest.fixture
def robot(db):
    """The user the remote knows us as: our token there."""
    return User.objects.create_user("outer-robot")


@pytest.fixture
def docs(agent, docs_agent, robot, monkeypatch):
    """`docs`, registered here as a remote agent of the demo agent, reached in process."""
    monkeypatch.setattr(remote_module, "transport_for_tests", httpx.ASGITransport(app=application))
    remote = RemoteAgent.objects.create(name="docs", card_url=CARD_URL, token=ApiToken.issue(robot), timeout_seconds=20)
    remote.agents.add(agent)
    return remote


def ask(user, agent, message: str) -> Conversation:
    """The outer conversation, once the loop has gone as far as it goes (inline)."""
    raw = json.dumps({"message": message})
    conversation = services.start_conversation(user=user, agent=agent, content=f"call docs__ask with {raw}")
    conversation.refresh_from_db()
    return conversation


def outer_call(conversation) -> ToolCall:
    return ToolCall.objects.get(message__conversation=conversation, name="docs__ask")


def inner_conversation(docs_agent) -> Conversation:
    return Conversation.objects.get(agent=docs_agent)


def sandbox_file(settings, conversation, name: str):
    return settings.HITL_SANDBOX_ROOT / str(conversation.pk) / name


def approve(approval: Approval, user) -> None:
    decide(approval.pk, user=user, approve=True, via=Approval.Via.CHAT, shown_hash=approval.shown_hash)


# --- The round trip ----------------------------------------------------------------------------------


def test_the_remote_call_waiting_there_is_decided_here_and_its_file_written_once(alice, agent, docs, docs_agent, robot, settings):
    conversation = ask(alice, agent, "write hello to notes.txt")

    call = outer_call(conversation)
    [child] = call.input_requests.select_related("approval")
    inner = inner_conversation(docs_agent)
    [inner_approval] = pending_approvals(inner)
    assert call.status == Status.WAITING_FOR_INPUT
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert child.name == "docs__write_file" and child.arguments == {"path": "notes.txt", "content": "hello"}
    assert child.approval.kind == Approval.Kind.ACTION and child.approval.status == Approval.Status.PENDING
    assert child.approval.preview["text"].startswith("Via docs (a remote A2A agent): write_file")
    assert "docs, a remote agent, asks a human before it runs write_file" in child.approval.reason
    assert call.input_state["task_id"] == str(Task.objects.get(conversation=inner).pk)
    assert not sandbox_file(settings, inner, "notes.txt").exists()

    approve(child.approval, alice)

    conversation.refresh_from_db()
    call.refresh_from_db()
    child.refresh_from_db()
    inner_approval.refresh_from_db()
    assert (inner_approval.status, inner_approval.decided_via, inner_approval.decided_by) == ("approved", "a2a", robot)
    assert sandbox_file(settings, inner, "notes.txt").read_text() == "hello"
    assert ToolCall.objects.filter(message__conversation=inner, name="write_file", status=Status.SUCCEEDED).count() == 1
    assert child.status == Status.SUCCEEDED and "passed on to docs__ask" in child.result
    assert call.status == Status.SUCCEEDED and "I did write notes.txt" in call.result
    assert conversation.status == Conversation.Status.IDLE
    assert "I did run docs__ask" in conversation.messages.last().content
