"""The agent loop, in-process: eager Celery, real commits (transactional_db), the scripted model."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from approvals.models import Approval
from approvals.services import AlreadyDecided, decide, decide_all
from chat import loop, services
from chat.history import REJECTION_NUDGE
from chat.scripted import SCRIPTED_REQUESTS
from chat.models import Conversation, Message, OutboxEmail, ToolCall
from tests.conftest import pending_approvals, sandbox, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def say(conversation, user, text):
    services.post_message(conversation=conversation, user=user, content=text)
    conversation.refresh_from_db()
    return conversation



def calls(conversation) -> list[ToolCall]:
    return list(ToolCall.objects.filter(message__conversation=conversation).order_by("message__position", "position"))


def last_reply(conversation) -> str:
    return conversation.messages.filter(role=Message.Role.ASSISTANT).last().content


def test_gated_call_waits_then_runs_once_when_approved(alice, agent, settings):
    conversation = start(alice, agent, "write hello to notes.txt")
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    [call] = calls(conversation)
    assert call.status == ToolCall.Status.PENDING_APPROVAL
    assert not (sandbox(settings, conversation) / "notes.txt").exists()

    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash="")

    conversation.refresh_from_db()
    call.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert call.status == ToolCall.Status.SUCCEEDED and call.started_at and call.finished_at
    assert (sandbox(settings, conversation) / "notes.txt").read_text() == "hello"
    assert last_reply(conversation) == "I did write notes.txt: Wrote 5 bytes to notes.txt."


def test_rejected_call_never_runs_and_the_model_reads_the_reason(alice, agent, settings):
    conversation = start(alice, agent, "email bob@example.com about the launch")
    [approval] = pending_approvals(conversation)

    decide(approval.pk, user=alice, approve=False, via=Approval.Via.CHAT, reason="Not before Monday", shown_hash="")

    conversation.refresh_from_db()
    assert OutboxEmail.objects.count() == 0
    assert calls(conversation)[0].status == ToolCall.Status.REJECTED
    sent = SCRIPTED_REQUESTS[-1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_0_0", "content": "Rejected by alice: Not before Monday" + REJECTION_NUDGE}
    assert "Not before Monday" in last_reply(conversation)
    assert conversation.status == Conversation.Status.IDLE


def test_two_calls_in_one_turn_can_be_decided_differently(alice, agent, settings):
    conversation = start(alice, agent, "write one to a.txt")
    decide(pending_approvals(conversation)[0].pk, user=alice, approve=True, via="chat", shown_hash="")
    conversation = say(conversation, alice, "write two to b.txt")
    decide(pending_approvals(conversation)[0].pk, user=alice, approve=True, via="chat", shown_hash="")

    conversation = say(conversation, alice, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL

    decide(first.pk, user=alice, approve=False, via="chat", reason="keep a", shown_hash="")
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL  # b.txt still undecided

    decide(second.pk, user=alice, approve=True, via="chat", shown_hash="")
    conversation.refresh_from_db()
    box = sandbox(settings, conversation)
    assert (box / "a.txt").exists() and not (box / "b.txt").exists()
    assert last_reply(conversation) == "I did not delete a.txt (Rejected by alice: keep a). I did delete b.txt: Deleted b.txt."
    assert conversation.status == Conversation.Status.IDLE


def test_approve_all_decides_every_pending_call(alice, agent, settings):
    conversation = start(alice, agent, "delete x.txt, y.txt and z.txt")
    assert len(pending_approvals(conversation)) == 3

    decided = decide_all(conversation_id=conversation.pk, user=alice, via="chat", shown=None).decided

    assert len(decided) == 3
    conversation.refresh_from_db()
    assert [c.status for c in calls(conversation)] == [ToolCall.Status.FAILED] * 3  # no such files, but they ran
    assert conversation.status == Conversation.Status.IDLE


def test_approve_all_with_ids_leaves_calls_the_user_did_not_see(alice, agent):
    conversation = start(alice, agent, "delete x.txt and y.txt")
    seen, unseen = pending_approvals(conversation)

    decided = decide_all(conversation_id=conversation.pk, user=alice, via="chat", shown=dict.fromkeys([seen.pk], "")).decided

    assert [a.pk for a in decided] == [seen.pk]
    unseen.refresh_from_db()
    conversation.refresh_from_db()
    assert unseen.status == Approval.Status.PENDING
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL


def test_non_gated_call_runs_without_stopping(alice, agent):
    conversation = start(alice, agent, "what is (2 + 3) * 4")
    [call] = calls(conversation)
    assert call.status == ToolCall.Status.SUCCEEDED and not call.is_gated
    assert not Approval.objects.exists()
    assert last_reply(conversation) == "I did calculate (2 + 3) * 4: (2 + 3) * 4 = 20"
    assert conversation.status == Conversation.Status.IDLE


@pytest.fixture
def local_site():
    class Page(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"local page")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_dynamic_gate_runs_allowlisted_domains_and_asks_for_others(alice, agent, local_site):
    agent.fetch_allowlist, agent.allow_private_fetch = ["localhost"], True
    agent.save()
    conversation = start(alice, agent, f"fetch http://localhost:{local_site}/")
    [allowed] = calls(conversation)
    assert allowed.status == ToolCall.Status.SUCCEEDED and "local page" in allowed.result

    conversation = say(conversation, alice, f"fetch http://127.0.0.1:{local_site}/")
    [approval] = pending_approvals(conversation)
    assert "127.0.0.1 is not on the agent's allowlist" in approval.reason
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL


def test_second_decision_changes_nothing_and_the_call_runs_once(alice, bob, agent, settings):
    conversation = start(alice, agent, "email carol@example.com about lunch")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash="")

    with pytest.raises(AlreadyDecided):
        decide(approval.pk, user=bob, approve=False, via="dashboard", reason="too late", shown_hash="")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "chat")
    assert OutboxEmail.objects.count() == 1


def test_typed_yes_approves_all_pending_calls_and_keeps_the_message(alice, agent, settings):
    conversation = start(alice, agent, "write hi to a.txt")
    conversation = say(conversation, alice, "yes")

    approval = Approval.objects.get(conversation=conversation)
    assert (approval.status, approval.decided_via) == ("approved", "text")
    assert conversation.messages.filter(role="user", content="yes", in_model_context=False).exists()
    assert (sandbox(settings, conversation) / "a.txt").exists()
    assert all(m.get("content") != "yes" for m in SCRIPTED_REQUESTS[-1]["messages"])


def test_typed_no_with_a_reason_rejects(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    conversation = say(conversation, alice, "reject all 2 because those are the only copies")

    approvals = Approval.objects.filter(conversation=conversation)
    assert {a.status for a in approvals} == {"rejected"}
    assert {a.rejection_reason for a in approvals} == {"those are the only copies"}
    assert "Rejected by alice: those are the only copies" in last_reply(conversation)


def test_ambiguous_reply_decides_nothing_and_asks_for_a_decision_per_call(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    conversation = say(conversation, alice, "yes but not b.txt")

    assert len(pending_approvals(conversation)) == 2
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    notice = conversation.messages.last()
    assert notice.role == "system" and "Decide each call" in notice.content


def test_other_message_is_held_and_answered_after_the_decision(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    conversation = say(conversation, alice, "what is 6 * 7")
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert len(SCRIPTED_REQUESTS) and not any(
        m.get("content") == "what is 6 * 7" for m in SCRIPTED_REQUESTS[-1]["messages"]
    )

    decide(pending_approvals(conversation)[0].pk, user=alice, approve=True, via="chat", shown_hash="")

    conversation.refresh_from_db()
    # The request after the decision: the held message comes after the tool result, as provider
    # APIs require. (The request after that carries the calculator's result.)
    roles = [(m["role"], m.get("content")) for m in SCRIPTED_REQUESTS[-2]["messages"]]
    assert roles[-2:] == [("tool", "Wrote 2 bytes to a.txt."), ("user", "what is 6 * 7")]
    assert last_reply(conversation) == "I did calculate 6 * 7: 6 * 7 = 42"
    assert conversation.status == Conversation.Status.IDLE


def test_two_approval_rounds_in_one_conversation(alice, agent, settings):
    conversation = start(alice, agent, "write first to a.txt")
    decide(pending_approvals(conversation)[0].pk, user=alice, approve=True, via="chat", shown_hash="")
    conversation = say(conversation, alice, "write second to a.txt")
    decide(pending_approvals(conversation)[0].pk, user=alice, approve=True, via="chat", shown_hash="")

    conversation.refresh_from_db()
    assert Approval.objects.filter(conversation=conversation, status="approved").count() == 2
    assert (sandbox(settings, conversation) / "a.txt").read_text() == "second"
    assert conversation.status == Conversation.Status.IDLE


@pytest.mark.parametrize(
    "text,error",
    [
        ("call format_disk with {}", "Unknown tool 'format_disk'"),
        ('call write_file with {"path": "a.txt"', "not valid JSON"),
        ('call write_file with {"path": "a.txt"}', "content: Field required"),
        ('call read_file with {"path": "../../etc/passwd"}', "outside the sandbox"),
    ],
)
def test_bad_calls_become_error_results_and_the_loop_goes_on(alice, agent, text, error):
    conversation = start(alice, agent, text)

    [call] = calls(conversation)
    assert call.status == ToolCall.Status.FAILED and error in call.error
    assert not Approval.objects.exists()
    tool_message = SCRIPTED_REQUESTS[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and error in tool_message["content"]
    assert conversation.status == Conversation.Status.IDLE
    assert last_reply(conversation).startswith("I could not")


def test_every_tool_call_gets_exactly_one_result_before_the_next_model_call(alice, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")
    decide_all(conversation_id=conversation.pk, user=alice, via="chat", shown=None)

    sent = SCRIPTED_REQUESTS[-1]["messages"]
    call_ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    result_ids = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert sorted(call_ids) == sorted(result_ids) and len(set(result_ids)) == 3


def test_a_claimed_call_is_not_run_by_a_second_worker(alice, agent, settings):
    conversation = start(alice, agent, "email dan@example.com about rent")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(status="approved", decided_at=approval.requested_at, decided_by=alice)
    first, second = ToolCall.objects.get(pk=approval.tool_call_id), ToolCall.objects.get(pk=approval.tool_call_id)
    loop.apply_decision(first.pk)
    first.refresh_from_db()
    second.refresh_from_db()

    loop._run(first, conversation)
    loop._run(second, conversation)  # a second worker holding the same approved call

    assert OutboxEmail.objects.count() == 1
    first.refresh_from_db()
    assert first.status == ToolCall.Status.SUCCEEDED


def test_arguments_changed_after_approval_are_refused(alice, agent, settings):
    conversation = start(alice, agent, "write safe to a.txt")
    [approval] = pending_approvals(conversation)
    ToolCall.objects.filter(pk=approval.tool_call_id).update(arguments={"path": "a.txt", "content": "evil"})

    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash="")

    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.FAILED and "differ from the ones that were approved" in call.error
    assert not (sandbox(settings, conversation) / "a.txt").exists()


def test_a_call_left_running_by_a_dead_worker_is_interrupted_not_rerun(alice, agent, settings):
    conversation = start(alice, agent, "email erin@example.com about keys")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(status="approved", decided_at=approval.requested_at, decided_by=alice)
    # The state a worker leaves when it dies inside the tool: claimed (running), lease still held.
    ToolCall.objects.filter(pk=approval.tool_call_id).update(status="running")
    Conversation.objects.filter(pk=conversation.pk).update(status="running", advancing_token="dead-task")

    loop.advance(conversation.pk, token="dead-task")  # the redelivered task takes its lease over

    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.INTERRUPTED
    assert OutboxEmail.objects.count() == 0
    assert "Interrupted" in SCRIPTED_REQUESTS[-1]["messages"][-1]["content"]
    assert "I did not email erin@example.com" in last_reply(conversation)


def test_a_task_that_does_not_hold_the_lease_does_nothing(alice, agent):
    conversation = start(alice, agent, "hello")
    count = conversation.messages.count()
    Conversation.objects.filter(pk=conversation.pk).update(status="running", advancing_token="other", advancing_until="2999-01-01T00:00:00Z")
    Message.objects.create(conversation=conversation, position=99, role="user", content="hello again")

    loop.advance(conversation.pk, token="mine")

    assert conversation.messages.count() == count + 1  # nothing answered: another task holds it


def test_max_steps_stops_the_loop_with_a_notice(alice, agent):
    agent.max_steps = 1
    agent.save()
    conversation = start(alice, agent, "what is 1 + 1")

    assert conversation.status == Conversation.Status.IDLE
    assert conversation.messages.last().content == "Stopped after 1 model steps without a final answer."


def test_sweeper_resumes_a_conversation_whose_enqueue_was_lost(alice, agent, settings):
    from chat.recovery import claim_stalled

    settings.HITL_STALL_SECONDS = 0
    conversation = start(alice, agent, "write a to a.txt")
    [approval] = pending_approvals(conversation)
    # The decision is stored but its receiver never ran (as if the process died after commit).
    Approval.objects.filter(pk=approval.pk).update(status="approved", decided_at=approval.requested_at, decided_by=alice)

    assert claim_stalled() == [str(conversation.pk)]
    loop.advance(conversation.pk)

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert (sandbox(settings, conversation) / "a.txt").read_text() == "a"


def test_plain_text_gets_a_plain_reply(alice, agent):
    conversation = start(alice, agent, "hello there")
    assert "scripted model" in last_reply(conversation)
    assert not ToolCall.objects.exists()
    assert json.dumps(SCRIPTED_REQUESTS[-1]["tools"])  # the agent's tools were offered


def test_a_reply_counts_as_a_decision_as_soon_as_calls_are_pending(alice, agent):
    """The calls are stored a moment before the status says waiting; a fast "yes" still decides."""
    conversation = start(alice, agent, "write hi to a.txt")
    Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.Status.RUNNING)

    services.post_message(conversation=conversation, user=alice, content="yes")

    assert Approval.objects.get(conversation=conversation).decided_via == "text"


def test_pushes_that_fail_are_logged_and_the_loop_goes_on(alice, agent, settings, monkeypatch, caplog):
    """Pushes are best effort (pages re-read the database when their socket reconnects): a channel
    layer that is down must not fail the conversation, nor lose the approval."""
    from channels.layers import get_channel_layer

    async def broken_send(group, message):
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(get_channel_layer(), "group_send", broken_send)
    conversation = start(alice, agent, "write hello to notes.txt")

    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    decide(Approval.objects.get(conversation=conversation).pk, user=alice, approve=True, via="api", shown_hash="")
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert (sandbox(settings, conversation) / "notes.txt").read_text() == "hello"
    assert "push to conversation." in caplog.text and "Redis is down" in caplog.text


def test_the_card_goes_out_before_the_dashboards_and_webhooks_hear_of_it(alice, agent, monkeypatch):
    """The owner is the one waiting: on commit, the card is the first push."""
    from channels.layers import get_channel_layer

    sent = []

    async def record(group, message):
        sent.append((group, message["html"]))

    monkeypatch.setattr(get_channel_layer(), "group_send", record)
    conversation = start(alice, agent, "write hello to notes.txt")

    card = next(i for i, (group, html) in enumerate(sent) if 'class="tool-card' in html)
    dashboard = next(i for i, (group, html) in enumerate(sent) if group == "approvals")
    assert sent[card][0] == f"conversation.{conversation.pk}"
    assert card < dashboard


def test_a_calls_preview_is_made_outside_the_turns_transaction(alice, agent, monkeypatch):
    """A preview may ask a tool server for seconds: SQLite's one write lock must not wait on it."""
    from django.db import transaction

    from chat import gating

    seen = []
    real = gating.preview_of

    def watched(spec, arguments, context):
        seen.append(transaction.get_connection().in_atomic_block)
        return real(spec, arguments, context)

    monkeypatch.setattr(gating, "preview_of", watched)
    conversation = start(alice, agent, "write hello to notes.txt")

    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert seen == [False]
    assert pending_approvals(conversation)[0].preview["kind"] == "file"


@pytest.mark.parametrize("prompt", ["hello", "write hi to a.txt"], ids=["an answer", "a turn with calls"])
def test_a_message_written_while_the_model_answers_is_read_before_an_answer_is_kept(alice, agent, monkeypatch, prompt):
    """The answer in flight never read it: kept, it would sit after the message and leave it
    unanswered. It is dropped (nothing of it ran, no card is left) and the model asked again."""
    real_complete, asked = loop.complete, []

    def complete(**kwargs):
        asked.append([m["content"] for m in kwargs["messages"] if m["role"] == "user"])
        if len(asked) == 1:  # the user writes while the first answer is on its way
            conversation = Conversation.objects.get(owner=alice)
            services.post_message(conversation=conversation, user=alice, content="what is 6 * 7")
        return real_complete(**kwargs)

    monkeypatch.setattr(loop, "complete", complete)

    conversation = start(alice, agent, prompt)

    assert asked[:2] == [[prompt], [prompt, "what is 6 * 7"]]
    assert "42" in last_reply(conversation)
    assert conversation.status == Conversation.Status.IDLE
    replies = Message.objects.filter(conversation=conversation, role=Message.Role.ASSISTANT).order_by("position")
    assert replies.last().position > Message.objects.get(conversation=conversation, content="what is 6 * 7").position
    # The second answer (scripted: to the newest message) used the calculator; the dropped one left nothing.
    assert [call.name for call in ToolCall.objects.filter(message__conversation=conversation)] == ["calculator"]
    assert not Approval.objects.filter(conversation=conversation).exists()
