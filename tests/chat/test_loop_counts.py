"""What one loop step costs the database and the sockets, counted (issue 24): a start (the model's
final answer), a resume (the approved call run, then the model), a gated start (the turn that asks,
left waiting). A step that grows fails here, with the statements it ran."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import Approval
from approvals.services import decide, decide_all
from chat import loop, recovery, services, streaming, tasks
from chat.models import Conversation, ToolCall
from core import live

pytestmark = pytest.mark.django_db(transaction=True)

# The most each step may run, BEGIN and COMMIT left out (PostgreSQL's BEGIN is implicit). A start:
# the lease, the conversation, its messages, the agent's tool servers, then the turn's transaction
# (lock, next position, the message, the status). A resume adds the turn's calls, the claim, the
# re-read of the approved arguments, the result and the messages written meanwhile. Each adds, once
# the answer is committed, one indexed look for A2A clients that asked to be told of the task's state
# (agentlink.receivers: push notification configs; issue 29).
START_STATEMENTS = 9
RESUME_STATEMENTS = 14


@pytest.fixture
def step(monkeypatch):
    """Run loop.advance once and return (statements, pushes to the conversation's group). The
    stream is batched wholly (no clock in the counts) and never checked for a Stop meanwhile."""
    monkeypatch.setattr(tasks.advance_conversation, "delay", lambda *args: None)  # the test runs the step
    monkeypatch.setattr(streaming, "STREAM_FLUSH_SECONDS", 3600)
    monkeypatch.setattr(streaming, "STOP_CHECK_SECONDS", 3600)

    def run(conversation: Conversation) -> tuple[list[str], list[str]]:
        pushes = []
        send = live.send_now

        def recorded(group, event):
            if group == live.conversation_group(conversation.pk):
                pushes.append(event["html"])
            send(group, event)

        monkeypatch.setattr(live, "send_now", recorded)
        with CaptureQueriesContext(connection) as queries:
            loop.advance(conversation.pk)
        monkeypatch.setattr(live, "send_now", send)
        statements = [q["sql"] for q in queries if not q["sql"].startswith(("BEGIN", "COMMIT"))]
        return statements, pushes

    return run


def assert_at_most(statements: list[str], most: int) -> None:
    listing = "\n".join(statements)
    assert len(statements) <= most, f"{len(statements)} statements, at most {most}:\n{listing}"
    assert len(set(statements)) == len(statements), f"a statement repeated:\n{listing}"
    assert not any(sql.startswith(("SAVEPOINT", "RELEASE")) for sql in statements), listing


def test_a_start_step_is_a_few_statements_and_the_answer_one_frame(alice, agent, step):
    conversation = services.start_conversation(user=alice, agent=agent, content="hello")

    statements, pushes = step(conversation)

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert_at_most(statements, START_STATEMENTS)
    # The first streamed words, then the answer: the message, the streamed copy cleared, the status.
    assert len(pushes) == 2
    assert 'hx-swap-oob="beforeend:#stream-' in pushes[0]
    assert 'id="message-' in pushes[1] and f'id="stream-{conversation.pk}"' in pushes[1] and "conversation-status" in pushes[1]


def test_a_resume_step_is_a_few_statements_and_each_card_one_push(alice, agent, step, settings):
    conversation = services.start_conversation(user=alice, agent=agent, content="write hello to notes.txt")
    step(conversation)
    approval = Approval.objects.get(conversation=conversation)
    decide(approval.pk, user=alice, approve=True, via="api", shown_hash="")
    recovery.resume_decided([conversation.pk])  # whoever decides flips it to running (done already, or now)

    statements, pushes = step(conversation)

    conversation.refresh_from_db()
    call = ToolCall.objects.get(message__conversation=conversation)
    assert conversation.status == Conversation.Status.IDLE and call.status == ToolCall.Status.SUCCEEDED
    assert (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "notes.txt").read_text() == "hello"
    assert_at_most(statements, RESUME_STATEMENTS)
    # The card running (with its turn's Approve all, which the decision changed), the card
    # succeeded, the first streamed words, the answer.
    assert len(pushes) == 4
    assert 'data-status="running"' in pushes[0] and f'id="approve-all-{call.message_id}"' in pushes[0]
    assert 'data-status="succeeded"' in pushes[1] and "approve-all-" not in pushes[1]
    assert 'hx-swap-oob="beforeend:#stream-' in pushes[2]
    assert 'id="message-' in pushes[3] and 'data-status="idle"' in pushes[3]


def test_a_turn_that_asks_a_human_leaves_the_conversation_waiting_in_one_step_and_one_frame(alice, agent, step):
    conversation = services.start_conversation(user=alice, agent=agent, content="write hello to notes.txt")
    steps = []
    real_step = loop._step

    def counted(*args, **kwargs):
        steps.append(1)
        return real_step(*args, **kwargs)

    loop._step = counted
    try:
        statements, pushes = step(conversation)
    finally:
        loop._step = real_step

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL and conversation.advancing_token == ""
    assert Approval.objects.get(conversation=conversation).status == Approval.Status.PENDING
    assert len(steps) == 1
    # The streamed words, then the turn with its card and the bar saying what to decide, together.
    assert 'class="tool-card' in pushes[-1] and 'data-status="waiting_for_approval"' in pushes[-1]
    assert not any('data-status="running"' in html and "conversation-status" in html for html in pushes)


def test_the_calls_of_an_approved_turn_share_frames_each_card_running_before_its_tool(alice, agent, step):
    """Three approved calls: the first card running, then each card finished together with the
    next one claimed, then the last card finished: four frames, not six; each card still shows
    running before its tool runs."""
    conversation = services.start_conversation(user=alice, agent=agent, content="delete x.txt, y.txt and z.txt")
    step(conversation)
    decide_all(conversation_id=conversation.pk, user=alice, via="chat", shown=None)
    recovery.resume_decided([conversation.pk])

    statements, pushes = step(conversation)

    first, second, third = ToolCall.objects.filter(message__conversation=conversation).order_by("position")
    assert [c.status for c in (first, second, third)] == [ToolCall.Status.FAILED] * 3  # no such files, but they ran
    cards = [html for html in pushes if 'class="tool-card' in html]
    assert len(cards) == 4
    assert f'id="tool-call-{first.pk}"' in cards[0] and 'data-status="running"' in cards[0]
    assert cards[1].index(f'id="tool-call-{first.pk}"') < cards[1].index(f'id="tool-call-{second.pk}"')
    assert f'id="tool-call-{third.pk}"' in cards[3] and 'data-status="failed"' in cards[3]
