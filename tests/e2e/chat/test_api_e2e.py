"""End to end through the real parts: the API on daphne, the loop in a Celery worker process,
Redis as broker and channel layer, the scripted model. Asserted on stored state."""
import os
import signal

import pytest
from django.test import Client
from websockets.sync.client import connect

from approvals.models import Approval
from chat.models import Conversation, Message, OutboxEmail, ToolCall
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e


def start(api, text: str) -> str:
    response = api.post("conversations", {"agent": "demo", "message": text})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def wait_for_status(conversation_id: str, status: str, timeout: float = 15) -> Conversation:
    return wait_until(
        lambda: Conversation.objects.filter(pk=conversation_id, status=status).first(),
        timeout=timeout,
        message=f"conversation {conversation_id} to be {status}",
    )


def wait_for_pending(api, conversation_id: str, count: int) -> list[dict]:
    def pending():
        items = [a for a in api.get("approvals", status="pending").json()["items"] if a["conversation_id"] == conversation_id]
        return items if len(items) == count else None

    return wait_until(pending, timeout=15, message=f"{count} pending approvals")


def last_reply(conversation_id: str) -> str:
    return Message.objects.filter(conversation_id=conversation_id, role="assistant").last().content


def test_gated_call_waits_in_the_worker_and_runs_once_after_approval(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "write hello to notes.txt")
    [approval] = wait_for_pending(api, conversation_id, 1)
    wait_for_status(conversation_id, "waiting_for_approval")
    assert not (e2e.sandbox_root / conversation_id / "notes.txt").exists()

    response = api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})

    assert response.status_code == 200
    wait_for_status(conversation_id, "idle")
    assert (e2e.sandbox_root / conversation_id / "notes.txt").read_text() == "hello"
    call = ToolCall.objects.get(pk=approval["tool_call"]["id"])
    assert call.status == ToolCall.Status.SUCCEEDED
    assert last_reply(conversation_id) == "I did write notes.txt: Wrote 5 bytes to notes.txt."


def test_rejection_reason_reaches_the_model_and_the_tool_never_runs(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "email bob@example.com about the merger")
    [approval] = wait_for_pending(api, conversation_id, 1)

    api.post(f"approvals/{approval['id']}/decision", {"decision": "reject", "reason": "Legal has not signed off"})

    wait_for_status(conversation_id, "idle")
    assert OutboxEmail.objects.count() == 0
    assert last_reply(conversation_id) == (
        "I did not email bob@example.com about the merger (Rejected by alice: Legal has not signed off)."
    )


def test_two_calls_in_a_turn_one_approved_one_rejected(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "write one to a.txt")
    [first] = wait_for_pending(api, conversation_id, 1)
    api.post(f"approvals/{first['id']}/decision", {"decision": "approve"})
    wait_for_status(conversation_id, "idle")
    api.post(f"conversations/{conversation_id}/messages", {"content": "write two to b.txt"})
    [second] = wait_for_pending(api, conversation_id, 1)
    api.post(f"approvals/{second['id']}/decision", {"decision": "approve"})
    wait_for_status(conversation_id, "idle")

    api.post(f"conversations/{conversation_id}/messages", {"content": "delete a.txt and b.txt"})
    delete_a, delete_b = wait_for_pending(api, conversation_id, 2)
    api.post(f"approvals/{delete_a['id']}/decision", {"decision": "reject", "reason": "keep a"})
    api.post(f"approvals/{delete_b['id']}/decision", {"decision": "approve"})

    wait_for_status(conversation_id, "idle")
    box = e2e.sandbox_root / conversation_id
    assert (box / "a.txt").exists() and not (box / "b.txt").exists()
    assert last_reply(conversation_id) == "I did not delete a.txt (Rejected by alice: keep a). I did delete b.txt: Deleted b.txt."


def test_approve_all_with_explicit_ids_leaves_the_other_call_pending(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "delete x.txt and y.txt")
    seen, unseen = wait_for_pending(api, conversation_id, 2)

    response = api.post(f"conversations/{conversation_id}/approve-all", {"ids": [seen["id"]]})

    assert response.json() == {"approved": [seen["id"]], "needs_confirmation": []}
    assert Approval.objects.get(pk=unseen["id"]).status == "pending"
    assert wait_for_status(conversation_id, "waiting_for_approval")
    refused = api.post(f"conversations/{conversation_id}/approve-all")  # without ids: names what is left, decides nothing
    assert refused.status_code == 409 and refused.json()["would_decide"] == [unseen["id"]]
    response = api.post(f"conversations/{conversation_id}/approve-all", {"ids": refused.json()["would_decide"]})
    assert response.json() == {"approved": [unseen["id"]], "needs_confirmation": []}
    wait_for_status(conversation_id, "idle")


def test_second_decision_is_409_and_the_email_is_sent_once(e2e, api_for, alice, bob, agent):
    api = api_for(alice)
    conversation_id = start(api, "email carol@example.com about lunch")
    [approval] = wait_for_pending(api, conversation_id, 1)

    first = api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})
    second = api_for(bob).post(f"approvals/{approval['id']}/decision", {"decision": "reject", "reason": "late"})

    assert (first.status_code, second.status_code) == (200, 409)
    wait_for_status(conversation_id, "idle")
    assert OutboxEmail.objects.count() == 1
    assert Approval.objects.get(pk=approval["id"]).decided_by == alice


def test_typed_yes_and_no_decide_and_an_ambiguous_reply_does_not(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "write hi to a.txt")
    wait_for_pending(api, conversation_id, 1)
    api.post(f"conversations/{conversation_id}/messages", {"content": "yes"})
    wait_for_status(conversation_id, "idle")
    assert Approval.objects.get(conversation_id=conversation_id).decided_via == "text"

    api.post(f"conversations/{conversation_id}/messages", {"content": "delete a.txt and b.txt"})
    wait_for_pending(api, conversation_id, 2)
    for unclear in ("yes but not b.txt", "yes"):  # with two pending, only "… all 2" decides
        api.post(f"conversations/{conversation_id}/messages", {"content": unclear})
        assert len(wait_for_pending(api, conversation_id, 2)) == 2
        assert "Decide each call" in Message.objects.filter(conversation_id=conversation_id).last().content

    api.post(f"conversations/{conversation_id}/messages", {"content": "reject all 2 because I still need them"})
    wait_for_status(conversation_id, "idle")
    assert (e2e.sandbox_root / conversation_id / "a.txt").exists()
    assert "Rejected by alice: I still need them" in last_reply(conversation_id)


def test_unknown_tools_and_malformed_arguments_become_errors_and_the_loop_goes_on(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "call rm_rf with {}")
    wait_for_status(conversation_id, "idle")
    api.post(f"conversations/{conversation_id}/messages", {"content": 'call write_file with {"path": '})
    wait_until(lambda: ToolCall.objects.filter(message__conversation_id=conversation_id).count() == 2, message="2nd call")
    wait_for_status(conversation_id, "idle")

    unknown, malformed = ToolCall.objects.filter(message__conversation_id=conversation_id).order_by("pk")
    assert unknown.status == malformed.status == ToolCall.Status.FAILED
    assert "Unknown tool 'rm_rf'" in unknown.error and "not valid JSON" in malformed.error
    assert not Approval.objects.exists()
    assert last_reply(conversation_id).startswith("I could not run write_file")


def test_another_users_conversation_is_not_found_over_http(e2e, api_for, alice, mallory, agent):
    conversation_id = start(api_for(alice), "hello")
    response = api_for(mallory).get(f"conversations/{conversation_id}")
    assert response.status_code == 404 and response.json() == {"detail": "No such conversation."}


def session_headers(user) -> dict:
    client = Client()
    client.force_login(user)
    return {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}


def open_socket(e2e, conversation_id: str, user=None, origin: str = ""):
    """The conversation's websocket on daphne, logged in as `user` (anonymous if None)."""
    return connect(
        f"{e2e.ws_url}/ws/conversations/{conversation_id}/",
        origin=origin or e2e.base_url,
        additional_headers=session_headers(user) if user else {},
    )


def receive_until(socket, text: str, timeout: float = 15) -> str:
    """Collect pushed fragments until one contains `text`."""
    received = []
    deadline_messages = 200
    for _ in range(deadline_messages):
        fragment = socket.recv(timeout=timeout)
        received.append(fragment)
        if text in fragment:
            return fragment
    raise AssertionError(f"{text!r} not pushed; got {received}")


def test_cards_and_decisions_are_pushed_to_an_open_websocket(e2e, api_for, alice, agent):
    api = api_for(alice)
    conversation_id = start(api, "hello")
    wait_for_status(conversation_id, "idle")

    with open_socket(e2e, conversation_id, alice) as socket:
        api.post(f"conversations/{conversation_id}/messages", {"content": "delete a.txt"})
        card = receive_until(socket, "pending_approval")
        [approval] = wait_for_pending(api, conversation_id, 1)
        assert f'id="tool-call-{approval["tool_call"]["id"]}"' in card and "delete_file" in card

        api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})
        decided = receive_until(socket, "status-failed")  # no a.txt to delete: it ran and failed
        assert "No file named" in decided
        streamed = receive_until(socket, f"beforeend:#stream-{conversation_id}")  # the reply, word by word
        assert streamed.endswith(">I </span>")  # the first word goes out at once; the rest in batches
        receive_until(socket, "I could not delete a.txt: No file named")  # then the stored message


def test_an_idle_websocket_still_receives_pushes_after_ten_seconds(e2e, api_for, alice, agent):
    """redis-py 8's default 5 s socket timeout used to make channels-redis drop idle sockets."""
    api = api_for(alice)
    conversation_id = start(api, "hello")
    wait_for_status(conversation_id, "idle")

    with open_socket(e2e, conversation_id, alice) as socket:
        with pytest.raises(TimeoutError):
            socket.recv(timeout=10)  # nothing happens for 10 s: the socket must survive it
        api.post(f"conversations/{conversation_id}/messages", {"content": "what is 3 * 3"})
        receive_until(socket, "3 * 3 = 9")


@pytest.mark.parametrize("who", ["anonymous", "mallory"])
def test_the_websocket_refuses_users_who_may_not_see_the_conversation(e2e, api_for, alice, mallory, agent, who):
    conversation_id = start(api_for(alice), "hello")
    with pytest.raises(Exception) as refused:
        with open_socket(e2e, conversation_id, mallory if who == "mallory" else None) as socket:
            socket.recv(timeout=5)
    assert "4403" in str(refused.value) or "403" in str(refused.value)


def test_the_websocket_refuses_a_foreign_origin(e2e, api_for, alice, agent):
    conversation_id = start(api_for(alice), "hello")
    with pytest.raises(Exception) as refused:
        with open_socket(e2e, conversation_id, alice, origin="http://evil.example") as socket:
            socket.recv(timeout=5)
    assert "403" in str(refused.value)


def test_daphne_prints_every_threads_stack_on_sigusr1_and_keeps_serving(e2e, api_for, alice):
    """What a request that never answers waits for: `kill -USR1` (the e2e hook sends it on a timeout)."""
    web = e2e.processes["web"]
    before = web.log.stat().st_size
    os.kill(web.popen.pid, signal.SIGUSR1)
    wait_until(lambda: "Current thread" in web.log.read_bytes()[before:].decode(errors="replace"), timeout=10, message="daphne's thread dump")
    assert api_for(alice).get("approvals").status_code == 200
