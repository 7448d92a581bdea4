"""Deciding with eyes open, end to end (issue 10): edit then approve, a run refused because the state
its preview showed changed, a typed confirmation for a critical call, and Stop, against the real
worker, Redis and daphne, through the JSON API. Asserted on stored state and the sandbox's files."""
import threading

import httpx
import pytest
from websockets.sync.client import connect

from approvals.models import Approval
from chat.models import Agent, Conversation, Message, OutboxEmail, ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import start_with_files
from tests.e2e.conftest import Api
from tests.e2e.chat.test_api_e2e import last_reply, session_headers, start, wait_for_pending, wait_for_status

pytestmark = pytest.mark.e2e

def say(api, conversation_id: str, text: str) -> None:
    response = api.post(f"conversations/{conversation_id}/messages", {"content": text})
    assert response.status_code == 202, response.text


def decide(api, approval: dict, **body) -> httpx.Response:
    return api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"} | body)


def pending_call(api, conversation_id: str) -> dict:
    """The one pending approval, once the conversation waits for it (the worker's step is over)."""
    wait_for_status(conversation_id, "waiting_for_approval")
    [approval] = wait_for_pending(api, conversation_id, 1)
    return approval


def settled_call(tool_call_id: int) -> ToolCall:
    """The call once it has finished (whatever way) and nothing advances its conversation any more."""

    def settled():
        call = ToolCall.objects.select_related("message__conversation").get(pk=tool_call_id)
        conversation = call.message.conversation
        quiet = conversation.status != Conversation.Status.RUNNING and not conversation.advancing_token
        return call if call.status in ToolCall.FINISHED and quiet else None

    return wait_until(settled, timeout=20, message=f"tool call {tool_call_id} to settle")


# --- Edit, then approve ------------------------------------------------------------------------


def test_approved_edit_is_what_runs_and_the_model_is_told_of_the_change(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "write hello to notes.txt")
    approval = pending_call(api, conversation_id)
    assert approval["arguments"] == {"path": "notes.txt", "content": "hello"}
    assert approval["approved_arguments"] is None and approval["edited_by"] is None
    assert approval["preview"]["kind"] == "file" and "New file notes.txt, 5 bytes" in approval["preview"]["text"]
    edited = {"path": "notes.txt", "content": "hello, edited"}

    response = decide(api, approval, arguments=edited)

    assert response.status_code == 200, response.text
    decided = response.json()
    assert (decided["status"], decided["approved_arguments"], decided["edited_by"]) == ("approved", edited, "alice")
    assert decided["arguments"] == {"path": "notes.txt", "content": "hello"}  # as the model asked
    wait_for_status(conversation_id, "idle")
    assert (e2e.sandbox_root / conversation_id / "notes.txt").read_text() == "hello, edited"
    call = ToolCall.objects.select_related("approval__edited_by").get(pk=approval["tool_call"]["id"])
    assert call.status == ToolCall.Status.SUCCEEDED
    assert call.result == (
        'Note: alice changed the arguments before approving (content: "hello" → "hello, edited").\n'
        "Wrote 13 bytes to notes.txt."
    )
    assert (call.approval.edited_arguments, call.approval.edited_by) == (edited, alice)
    assert call.arguments == {"path": "notes.txt", "content": "hello"}
    [listed] = [
        c["approval"] for m in api.get(f"conversations/{conversation_id}").json()["messages"] for c in m["tool_calls"]
    ]
    assert (listed["approved_arguments"], listed["edited_by"]) == (edited, "alice")
    assert "Note: alice changed the arguments" in last_reply(conversation_id)


def test_an_edit_the_tool_refuses_is_400_naming_the_field_and_stays_pending(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "write hello to notes.txt")
    approval = pending_call(api, conversation_id)

    response = decide(api, approval, arguments={"path": "notes.txt", "content": 42})

    assert response.status_code == 400
    assert "content" in response.json()["detail"]
    stored = Approval.objects.get(pk=approval["id"])
    assert (stored.status, stored.edited_arguments) == (Approval.Status.PENDING, None)
    assert Conversation.objects.get(pk=conversation_id).status == Conversation.Status.WAITING_FOR_APPROVAL
    assert not (e2e.sandbox_root / conversation_id / "notes.txt").exists()


# --- What was shown must still hold when it runs ------------------------------------------------


def test_a_write_whose_file_changed_after_the_preview_is_refused_and_the_model_is_told(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"notes.txt": "one"})
    say(api, conversation_id, "write two to notes.txt")
    approval = pending_call(api, conversation_id)
    assert approval["preview"]["kind"] == "diff" and "-one" in approval["preview"]["text"]
    notes = e2e.sandbox_root / conversation_id / "notes.txt"
    notes.write_text("changed behind the approver's back")  # what the diff showed no longer holds

    response = decide(api, approval)

    assert response.status_code == 200, response.text
    wait_for_status(conversation_id, "idle")
    call = ToolCall.objects.get(pk=approval["tool_call"]["id"])
    assert call.status == ToolCall.Status.FAILED
    assert call.error.startswith("Not run: the world changed since the approval")
    assert notes.read_text() == "changed behind the approver's back"
    assert last_reply(conversation_id).startswith(
        "I could not write notes.txt: Not run: the world changed since the approval"
    )


# --- Critical calls need their typed confirmation ----------------------------------------------


def test_delete_all_files_runs_only_with_the_typed_confirmation(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"a.txt": "one", "b.txt": "two"})
    sandbox = e2e.sandbox_root / conversation_id
    say(api, conversation_id, "delete all files")
    approval = pending_call(api, conversation_id)
    assert approval["risk"] == "critical"
    assert (approval["confirmation_required"], approval["confirmation_hint"]) == (True, "DELETE")
    assert approval["preview"]["text"].startswith("2 files will be deleted")

    unconfirmed = decide(api, approval)
    mistyped = decide(api, approval, confirmation="delete")
    in_bulk = api.post(f"conversations/{conversation_id}/approve-all", {"ids": [approval["id"]]})

    assert (unconfirmed.status_code, mistyped.status_code) == (400, 400)
    assert in_bulk.json() == {"approved": [], "needs_confirmation": [approval["id"]]}
    assert Approval.objects.get(pk=approval["id"]).status == Approval.Status.PENDING
    assert sorted(p.name for p in sandbox.iterdir()) == ["a.txt", "b.txt"]

    confirmed = decide(api, approval, confirmation="DELETE")

    assert confirmed.status_code == 200, confirmed.text
    wait_for_status(conversation_id, "idle")
    assert list(sandbox.iterdir()) == []
    call = ToolCall.objects.get(pk=approval["tool_call"]["id"])
    assert (call.status, call.result) == (ToolCall.Status.SUCCEEDED, "Deleted 2 file(s): a.txt, b.txt.")
    assert Approval.objects.get(pk=approval["id"]).decided_by == alice


# --- Stop ---------------------------------------------------------------------------------------


@pytest.fixture
def remote_api(e2e, fake_model, alice):
    """alice's API client, and an agent `remote` that talks to the fake model."""
    Agent.objects.create(open_to_everyone=True, slug="remote", name="Remote", model="openai/gpt-4o-mini", api_base=fake_model.base_url)
    api = Api(e2e.base_url, alice)
    yield api
    api.http.close()


def assistant_replies(conversation_id: str) -> list[str]:
    replies = Message.objects.filter(conversation_id=conversation_id, role=Message.Role.ASSISTANT)
    return list(replies.values_list("content", flat=True))


def test_stop_discards_a_model_answer_still_in_flight(e2e, remote_api, fake_model):
    api, worker = remote_api, e2e.processes["worker"]
    fake_model.respond_with_hang(2)  # then "Sorry, I was slow.", after the Stop
    response = api.post("conversations", {"agent": "remote", "message": "hello"})
    assert response.status_code == 201, response.text
    conversation_id = response.json()["id"]
    wait_until(lambda: len(fake_model.requests) == 1, timeout=20, message="the model call in flight")
    # The lease holder is the task: its id says which "succeeded" line to wait for (a count of such
    # lines could be moved by a stray task of an earlier test ending late).
    task_id = Conversation.objects.get(pk=conversation_id).advancing_token
    assert task_id

    stopped = api.post(f"conversations/{conversation_id}/stop")

    assert stopped.status_code == 200
    assert stopped.json() == {"status": "idle", "cancelled": []}
    # The task ends only after the late answer has landed (and been thrown away).
    done = f"Task chat.tasks.advance_conversation[{task_id}] succeeded"
    wait_until(lambda: done in worker.log.read_text(), timeout=30, message="the task to end")
    conversation = Conversation.objects.get(pk=conversation_id)
    assert (conversation.status, conversation.advancing_token) == (Conversation.Status.IDLE, "")
    assert assistant_replies(conversation_id) == []
    assert Message.objects.filter(conversation_id=conversation_id).last().content == "Stopped by alice."
    assert len(fake_model.requests) == 1
    assert "model call failed" not in worker.log.read_text()  # the answer came, and was thrown away

    fake_model.respond_with_text("Hello again.")
    say(api, conversation_id, "are you there?")
    wait_until(lambda: assistant_replies(conversation_id), timeout=20, message="the next answer")
    wait_for_status(conversation_id, "idle")
    assert assistant_replies(conversation_id) == ["Hello again."]
    assert "slow" not in str(fake_model.requests[1]["messages"])  # the model never hears the discarded answer


def pushed_until(socket, text: str, timeout: float = 30) -> list[str]:
    """Every fragment pushed to the socket up to and including the first that contains `text`."""
    received = []
    while not received or text not in received[-1]:
        received.append(socket.recv(timeout=timeout))
    return received


def test_a_stopped_answer_is_never_streamed_to_the_page(e2e, remote_api, fake_model, alice):
    api, base_url = remote_api, e2e.base_url
    fake_model.respond_with_hang(2)  # then "Sorry, I was slow.", streamed after the Stop
    fake_model.respond_with_text("Hello again.")
    conversation_id = api.post("conversations", {"agent": "remote", "message": "hello"}).json()["id"]
    socket_url = f"{base_url.replace('http', 'ws', 1)}/ws/conversations/{conversation_id}/"
    with connect(socket_url, origin=base_url, additional_headers=session_headers(alice)) as socket:
        wait_until(lambda: len(fake_model.requests) == 1, timeout=20, message="the model call in flight")
        assert api.post(f"conversations/{conversation_id}/stop").status_code == 200
        say(api, conversation_id, "are you there?")  # answered once the stopped task has ended

        pushed = pushed_until(socket, "Hello again.")

    assert not [fragment for fragment in pushed if "slow" in fragment]


ROUNDS = 5


def race_approval_and_stop(api_for, user, conversation_id: str, approval: dict) -> tuple[httpx.Response, ...]:
    """POST the approval and the Stop at the same moment, each on its own connection."""
    approver, stopper = api_for(user), api_for(user)
    barrier, responses = threading.Barrier(2), {}

    def post(name: str, api, path: str, body: dict | None) -> None:
        barrier.wait(timeout=10)
        responses[name] = api.post(path, body)

    approve = ("approve", approver, f"approvals/{approval['id']}/decision", {"decision": "approve"})
    stop = ("stop", stopper, f"conversations/{conversation_id}/stop", None)
    threads = [threading.Thread(target=post, args=approve), threading.Thread(target=post, args=stop)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return responses["approve"], responses["stop"]


def test_stop_racing_an_approval_lets_exactly_one_win_and_the_email_goes_out_at_most_once(e2e, api_for, alice, agent):
    api = api_for(alice)
    for round_number in range(ROUNDS):
        conversation_id = start(api, f"email carol@example.com about round {round_number}")
        approval = pending_call(api, conversation_id)

        approved, stopped = race_approval_and_stop(api_for, alice, conversation_id, approval)

        assert stopped.status_code == 200, stopped.text
        call = settled_call(approval["tool_call"]["id"])
        stored = Approval.objects.get(pk=approval["id"])
        sent = OutboxEmail.objects.filter(conversation_id=conversation_id).count()
        if approved.status_code == 200:
            # The approval won, and stays on record. The call ran once (the Stop cancelled nothing), or
            # had not started yet: then the Stop cancelled it and says so by the approval's id.
            assert stored.status == Approval.Status.APPROVED
            assert (call.status, sent, stopped.json()["cancelled"]) in [
                (ToolCall.Status.SUCCEEDED, 1, []),
                (ToolCall.Status.CANCELLED, 0, [approval["id"]]),
            ]
        else:
            # The Stop won: the decision found the approval cancelled, and the tool never ran.
            assert approved.status_code == 409, approved.text
            assert stopped.json()["cancelled"] == [approval["id"]]
            assert (stored.status, stored.decided_by, stored.decided_via) == ("cancelled", alice, "api")
            assert (call.status, sent) == (ToolCall.Status.CANCELLED, 0)
        assert Conversation.objects.get(pk=conversation_id).status == Conversation.Status.IDLE

