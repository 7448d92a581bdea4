"""Approval freshness (issue 28, item 6): an approved call that has not started within its agent's
`approval_valid_seconds` of the approval is not run. It lapses, the model reads why, the card says
so, and the same call asked again is approved afresh. The loop's run is the MCP gateway's run too.

"Workers down" is a receiver that enqueues nothing (the decision is stored, nobody runs the call);
"later" is the freshness check's clock moved on (a decided approval is final, its decided_at too).
Then the loop is advanced as a worker would."""
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from approvals.models import Approval
from approvals.services import decide
from chat import fragments, freshness, loop, receivers
from chat.models import ApiToken, Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def workers_down(monkeypatch):
    """Once called: decisions are stored and the conversation flipped to running, but no worker takes it on."""
    enqueued = []

    def down():
        monkeypatch.setattr(receivers.advance_conversation, "delay", lambda conversation_id: enqueued.append(conversation_id))
        return enqueued

    return down


@pytest.fixture
def later(monkeypatch):
    """Move the freshness check's clock `seconds` past the real one."""

    def move(seconds: float) -> None:
        real = timezone.now
        monkeypatch.setattr(freshness, "timezone", SimpleNamespace(now=lambda: real() + timedelta(seconds=seconds)))

    return move


def approved_while_workers_were_down(alice, agent, text: str, workers_down, later, *, seconds_ago: float) -> tuple[Conversation, Approval]:
    conversation = start_conversation(alice, agent, text)
    [approval] = pending_approvals(conversation)
    workers_down()
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    later(seconds_ago)
    approval.refresh_from_db()
    return conversation, approval


def workers_back(conversation: Conversation) -> None:
    loop.advance(conversation.pk)
    conversation.refresh_from_db()


def sandbox_file(conversation: Conversation, path: str) -> Path:
    return Path(django_settings.HITL_SANDBOX_ROOT) / str(conversation.pk) / path


def replies(conversation: Conversation) -> list[str]:
    return list(conversation.messages.filter(role=Message.Role.ASSISTANT).order_by("position").values_list("content", flat=True))


def test_a_call_approved_longer_ago_than_the_window_lapses_unrun_and_the_model_is_told(alice, agent, workers_down, later):
    agent.approval_valid_seconds = 60
    agent.save()
    conversation, approval = approved_while_workers_were_down(alice, agent, "write hi to notes/a.txt", workers_down, later, seconds_ago=61)
    assert workers_down()  # the decision asked for a worker; none came

    workers_back(conversation)

    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert (call.status, call.started_at, call.error) == (ToolCall.Status.LAPSED, None, "")
    assert call.result == (
        f"Not run: the approval lapsed before it could run (approved at {approval.decided_at:%H:%M} UTC, "
        "valid for 60 s). Ask again if it should still be done."
    )
    assert call.finished_at is not None
    assert not sandbox_file(conversation, "notes/a.txt").exists()
    assert conversation.status == Conversation.Status.IDLE
    assert replies(conversation)[-1].startswith("I did not write")  # the scripted model read the result
    assert "the approval lapsed" in replies(conversation)[-1]
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED  # the decision stands as made: only the call lapsed


def test_a_call_approved_within_the_window_runs(alice, agent, workers_down, later):
    agent.approval_valid_seconds = 60
    agent.save()
    conversation, approval = approved_while_workers_were_down(alice, agent, "write hi to notes/a.txt", workers_down, later, seconds_ago=30)

    workers_back(conversation)

    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED
    assert sandbox_file(conversation, "notes/a.txt").read_text() == "hi"


def test_without_a_window_an_approval_never_lapses(alice, agent, workers_down, later):
    assert agent.approval_valid_seconds is None
    conversation, approval = approved_while_workers_were_down(alice, agent, "write hi to notes/a.txt", workers_down, later, seconds_ago=86_400)

    workers_back(conversation)

    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED


def test_the_same_call_asked_again_after_a_lapse_is_approved_afresh_and_runs(alice, agent, workers_down, later, monkeypatch):
    agent.approval_valid_seconds = 60
    agent.save()
    conversation, lapsed = approved_while_workers_were_down(alice, agent, "write hi to notes/a.txt", workers_down, later, seconds_ago=61)
    workers_back(conversation)
    monkeypatch.undo()  # the workers are up again

    response = client_for(alice).post(f"/conversations/{conversation.pk}/messages/", {"content": "write hi to notes/a.txt"})
    assert response.status_code in (200, 302), response.content
    [again] = pending_approvals(conversation)  # asked again, not approved by the lapsed approval
    assert again.pk != lapsed.pk
    decide(again.pk, user=alice, approve=True, via="chat", shown_hash=again.shown_hash)

    assert ToolCall.objects.get(pk=again.tool_call_id).status == ToolCall.Status.SUCCEEDED
    assert ToolCall.objects.get(pk=lapsed.tool_call_id).status == ToolCall.Status.LAPSED
    assert sandbox_file(conversation, "notes/a.txt").read_text() == "hi"


def test_a_lapsed_card_says_lapsed_and_the_api_gives_the_status(alice, agent, workers_down, later, api_as):
    agent.approval_valid_seconds = 5
    agent.save()
    conversation, approval = approved_while_workers_were_down(alice, agent, "delete a.txt", workers_down, later, seconds_ago=6)
    workers_back(conversation)
    call = ToolCall.objects.select_related("approval", "message__conversation").get(pk=approval.tool_call_id)

    assert "⌛ Lapsed" in fragments.tool_card_html(call)
    assert "⌛ Lapsed" in client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    read = api_as(alice).get(f"conversations/{conversation.pk}").json()
    [shown] = [c for m in read["messages"] for c in m["tool_calls"]]
    assert (shown["status"], shown["result"]) == ("lapsed", call.result)


def test_a_call_still_pending_whose_approval_is_old_lapses_too(alice, agent, workers_down):
    """The loop may find the approval decided before the call was moved on (pending → running in one
    claim): that claim checks the approval's age too."""
    agent.approval_valid_seconds = 60
    agent.save()
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    workers_down()
    old = timezone.now() - timedelta(seconds=120)
    Approval.objects.filter(pk=approval.pk).update(status="approved", decided_at=old, decided_by=alice, decided_via="chat")
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.Status.RUNNING)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.PENDING_APPROVAL

    workers_back(conversation)

    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.LAPSED
    assert not sandbox_file(conversation, "notes/a.txt").exists()


def test_the_window_is_measured_from_the_decision_to_the_start():
    class Agent:
        approval_valid_seconds = 60

    class Approved:
        decided_at = timezone.now()

    at = Approved.decided_at
    assert freshness.lapsed_result(Approved, Agent, now=at + timedelta(seconds=60)) == ""
    assert freshness.lapsed_result(Approved, Agent, now=at + timedelta(seconds=60, microseconds=1)).startswith("Not run:")
    assert freshness.lapsed_result(None, Agent) == ""  # an ungated call has no approval to lapse


# --- The MCP gateway: its calls run through the same claim ------------------------------------------------


def test_an_mcp_call_approved_while_its_client_was_gone_lapses_when_the_client_calls_again(alice, agent, settings, later):
    from tests.mcpgateway.test_mcpgateway import WRITE, call_and_collect, text_of

    agent.approval_valid_seconds = 60
    agent.save()
    token = ApiToken.issue(alice)
    settings.HITL_MCP_WAIT_SECONDS = 0.5
    call_and_collect(token, "write_file", WRITE)  # the wait ends undecided: the client goes away
    approval = Approval.objects.get()
    decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)
    later(61)
    assert ToolCall.objects.get().status == "approved"  # nobody ran it

    settings.HITL_MCP_WAIT_SECONDS = 30
    result, _ = call_and_collect(token, "write_file", WRITE)  # joins the approved call, which lapses

    call = ToolCall.objects.get()
    assert (call.status, call.started_at) == ("lapsed", None)
    assert result.is_error and text_of(result) == call.result and "the approval lapsed" in call.result
    conversation = call.message.conversation
    assert not sandbox_file(conversation, WRITE["path"]).exists()

    settings.HITL_MCP_WAIT_SECONDS = 0.5
    call_and_collect(token, "write_file", WRITE)  # the same call again asks again: a lapsed call is never joined
    assert Approval.objects.count() == 2 and Approval.objects.order_by("pk").last().status == "pending"


def test_the_window_is_set_on_the_agents_admin_page(agent, admin_client):
    page = admin_client.get(f"/admin/chat/agent/{agent.pk}/change/").content.decode()
    assert 'name="approval_valid_seconds"' in page
    assert "column-approval_valid_seconds" in admin_client.get("/admin/chat/agent/").content.decode()
