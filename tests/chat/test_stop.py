"""Stop: every pending approval and every call not yet started is cancelled, by whoever stopped, via
the surface used; the conversation is left idle; the model hears of it on the next message."""
import threading

import pytest

from approvals.models import Approval
from approvals.services import AlreadyDecided, decide
from chat import loop, services
from chat.models import Agent, Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation as start, wait_until
from tests.standins.fake_openai import fake_openai  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_stop_cancels_every_pending_call_and_leaves_the_conversation_idle(alice, agent, api_as):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    ids = [a.pk for a in pending_approvals(conversation)]

    response = api_as(alice).post(f"conversations/{conversation.pk}/stop")

    assert response.status_code == 200
    assert response.json() == {"status": "idle", "cancelled": ids}
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    approvals = Approval.objects.order_by("pk")
    assert [(a.status, a.decided_by, a.decided_via) for a in approvals] == [("cancelled", alice, "api")] * 2
    assert [c.status for c in ToolCall.objects.all()] == ["cancelled", "cancelled"]
    assert conversation.messages.last().content == "Stopped by alice."


def test_the_model_is_told_on_the_next_message_which_calls_were_cancelled(alice, agent):
    conversation = start(alice, agent, "delete a.txt")
    services.stop_conversation(conversation=conversation, user=alice, via=Approval.Via.CHAT)

    services.post_message(conversation=conversation, user=alice, content="list files")

    replies = [m.content for m in conversation.messages.filter(role=Message.Role.ASSISTANT)]
    assert replies[-2] == "I did not delete a.txt (Cancelled by alice (Stop) before it ran.)"


def test_stop_with_nothing_to_stop_cancels_nothing(alice, agent, api_as):
    conversation = start(alice, agent, "what is 1 + 1")

    response = api_as(alice).post(f"conversations/{conversation.pk}/stop")

    assert response.status_code == 200 and response.json() == {"status": "idle", "cancelled": []}


def test_a_failed_conversation_with_nothing_to_stop_keeps_its_failure(alice, agent, api_as):
    conversation = start(alice, agent, "what is 1 + 1")
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.Status.FAILED, error="The model timed out.")

    response = api_as(alice).post(f"conversations/{conversation.pk}/stop")

    assert response.json() == {"status": "failed", "cancelled": []}
    conversation.refresh_from_db()
    assert conversation.error == "The model timed out." and not conversation.messages.filter(role="system").exists()


def test_someone_elses_conversation_cannot_be_stopped(alice, mallory, agent, api_as):
    conversation = start(alice, agent, "delete a.txt")

    assert api_as(mallory).post(f"conversations/{conversation.pk}/stop").status_code == 404
    assert client_for(mallory).post(f"/conversations/{conversation.pk}/stop/").status_code == 404
    assert pending_approvals(conversation)


def test_stop_needs_a_csrf_token_on_the_page(alice, agent):
    conversation = start(alice, agent, "delete a.txt")

    response = client_for(alice, csrf=True).post(f"/conversations/{conversation.pk}/stop/")

    assert response.status_code == 403 and pending_approvals(conversation)


def test_an_approver_stops_from_the_dashboard(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt")

    response = client_for(bob).post(f"/conversations/{conversation.pk}/stop/dashboard/", headers={"HX-Request": "true"})

    assert response.status_code == 204
    approval = Approval.objects.get()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("cancelled", bob, "dashboard")


def test_a_decision_after_a_stop_finds_the_approval_cancelled(alice, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    services.stop_conversation(conversation=conversation, user=alice, via=Approval.Via.CHAT)

    with pytest.raises(AlreadyDecided):
        decide(approval.pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash="")

    assert ToolCall.objects.get().status == ToolCall.Status.CANCELLED


def test_stop_after_an_approval_leaves_the_decided_call_alone(alice, agent, settings):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash="")  # runs at once (eager Celery)

    cancelled = services.stop_conversation(conversation=conversation, user=alice, via=Approval.Via.CHAT)

    assert cancelled == []
    approval.refresh_from_db()
    assert approval.status == "approved" and ToolCall.objects.get().status == ToolCall.Status.SUCCEEDED


def test_an_approved_call_not_yet_started_is_cancelled_and_never_runs(alice, agent, settings):
    conversation = start(alice, agent, "write hi to a.txt")
    call = ToolCall.objects.get()
    # Approved, and the worker has not claimed it yet: what a Stop between the two finds.
    Approval.objects.filter(tool_call=call).update(status="approved", decided_by=alice, decided_at=call.created_at)
    ToolCall.objects.filter(pk=call.pk).update(status=ToolCall.Status.APPROVED)
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.Status.RUNNING)

    cancelled = services.stop_conversation(conversation=conversation, user=alice, via=Approval.Via.CHAT)
    loop.advance(conversation.pk)

    call.refresh_from_db()
    assert call.status == ToolCall.Status.CANCELLED
    assert cancelled == [call.approval.pk] and call.approval.status == "approved"  # the decision stays on record
    assert not (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "a.txt").exists()


def test_a_model_answer_that_lands_after_a_stop_is_discarded(alice, fake_openai, settings, tmp_path):
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    agent = Agent.objects.create(open_to_everyone=True, slug="remote", name="Remote", model="openai/gpt-4o-mini", api_base=fake_openai.base_url)
    fake_openai.respond_with_hang(1.5)  # a model still answering when Stop is pressed
    conversation = Conversation.objects.create(owner=alice, agent=agent)
    worker = threading.Thread(
        target=services.post_message, kwargs={"conversation": conversation, "user": alice, "content": "hello"}
    )
    worker.start()
    wait_until(lambda: fake_openai.requests, timeout=10)

    services.stop_conversation(conversation=conversation, user=alice, via=Approval.Via.CHAT)
    worker.join(20)

    assert not worker.is_alive() and fake_openai.unanswered == 0
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert not conversation.messages.filter(role=Message.Role.ASSISTANT).exists()
    assert conversation.messages.last().content == "Stopped by alice."
