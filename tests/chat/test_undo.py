"""Undo (issue 40, item 4): a succeeded write_file or delete_file keeps what it changed; its undo is a
gated call of its own (its own approval, the same rules, requested by whoever undid), run at most
once and only while the file is as the call left it; the API's contract; what cannot be undone."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Approval, Rule
from chat.models import Conversation, Message, ToolCall
from tests.conftest import ApiClient, intact, only_pending, sandbox, say, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def approve(user, approval) -> None:
    response = ApiClient(user).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash})
    assert response.status_code == 200, response.content


def wrote(user, agent, text: str, conversation=None):
    """The conversation after `text` (a write) was approved and ran; and its call."""
    conversation = say(conversation, user, text) if conversation else start_conversation(user, agent, text)
    approve(user, only_pending(conversation))
    call = ToolCall.objects.filter(message__conversation=conversation).order_by("-pk").first()
    assert call.status == "succeeded", call.error
    return conversation, call


def test_an_overwrite_is_undone_through_its_own_approval_once(alice, agent, settings):
    conversation, first = wrote(alice, agent, "write one to notes.txt")
    conversation, second = wrote(alice, agent, "write two to notes.txt", conversation)
    path = sandbox(settings, conversation) / "notes.txt"
    assert path.read_text() == "two"
    listed = ApiClient(alice).get(f"conversations/{conversation.pk}").json()
    shown = [c for m in listed["messages"] for c in m["tool_calls"] if c["id"] == second.pk][0]
    assert shown["reversible"] is True and shown["undo_until"] is not None

    response = ApiClient(alice).post(f"tool-calls/{second.pk}/undo")

    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["name"], body["status"], body["undo_of"]) == ("undo", "pending_approval", second.pk)
    assert body["arguments"] == {"call_id": second.pk, "tool": "write_file", "path": "notes.txt"}
    assert body["approval"]["status"] == "pending" and body["approval"]["preview"]["kind"] == "diff"
    assert "-two" in body["approval"]["preview"]["text"] and "+one" in body["approval"]["preview"]["text"]
    assert path.read_text() == "two"  # nothing happens before its approval
    undo = ToolCall.objects.select_related("approval", "message").get(pk=body["id"])
    assert undo.message.in_model_context is False and undo.message.author == alice
    assert Conversation.objects.get(pk=conversation.pk).status == "idle"  # the agent is not running for it

    approve(alice, undo.approval)

    undo.refresh_from_db()
    assert undo.status == "succeeded" and undo.result == "Restored notes.txt as it was before the call."
    assert path.read_text() == "one"
    again = ApiClient(alice).post(f"tool-calls/{second.pk}/undo")
    assert again.status_code == 409 and f"has an undo already: call {undo.pk} (succeeded)" in again.json()["detail"]
    assert ApiClient(alice).post(f"tool-calls/{undo.pk}/undo").status_code == 409  # an undo is not undone
    assert not Message.objects.filter(conversation=conversation, role="assistant", in_model_context=True, position__gt=undo.message.position).exists()
    assert intact().startswith("audit chain intact")


def test_a_created_file_is_removed_and_a_deleted_file_put_back(alice, agent, settings):
    conversation, created = wrote(alice, agent, "write fresh to new.txt")
    path = sandbox(settings, conversation) / "new.txt"
    undo = ToolCall.objects.get(pk=ApiClient(alice).post(f"tool-calls/{created.pk}/undo").json()["id"])
    approve(alice, Approval.objects.get(tool_call=undo))
    assert not path.exists()

    conversation, _ = wrote(alice, agent, "write keep me to keep.txt", conversation)
    conversation, deleted = wrote(alice, agent, "delete keep.txt", conversation)
    kept = sandbox(settings, conversation) / "keep.txt"
    assert not kept.exists()
    undo = ToolCall.objects.get(pk=ApiClient(alice).post(f"tool-calls/{deleted.pk}/undo").json()["id"])
    assert "keep.txt is put back as it was when it was deleted:\nkeep me" in undo.approval.preview["text"]
    approve(alice, undo.approval)
    assert kept.read_text() == "keep me"


def test_a_file_changed_since_is_never_overwritten(alice, agent, settings):
    conversation, call = wrote(alice, agent, "write one to notes.txt")
    path = sandbox(settings, conversation) / "notes.txt"
    path.write_text("changed by hand")

    response = ApiClient(alice).post(f"tool-calls/{call.pk}/undo")
    assert response.status_code == 409 and response.json()["detail"] == "notes.txt changed since the call: undoing it would lose that change."

    path.write_text("one")  # as the call left it: may be undone
    undo = ToolCall.objects.get(pk=ApiClient(alice).post(f"tool-calls/{call.pk}/undo").json()["id"])
    path.write_text("changed after the undo was asked")
    approve(alice, Approval.objects.get(tool_call=undo))
    undo.refresh_from_db()
    assert undo.status == "failed" and "changed since the call" in undo.error
    assert path.read_text() == "changed after the undo was asked"


def test_what_cannot_be_undone_says_why(alice, mallory, agent, settings):
    conversation = start_conversation(alice, agent, "read nothing.txt")  # read_file: not reversible
    read = ToolCall.objects.get(message__conversation=conversation)
    assert ApiClient(alice).post(f"tool-calls/{read.pk}/undo").json()["detail"] in ("read_file cannot be undone.", "Only a call that succeeded can be undone.")
    conversation, call = wrote(alice, agent, "write one to notes.txt")
    assert ApiClient(mallory).post(f"tool-calls/{call.pk}/undo").status_code == 404  # not hers
    assert ApiClient(alice, scope="ask").post(f"tool-calls/{call.pk}/undo").status_code == 403
    assert ApiClient(None).post(f"tool-calls/{call.pk}/undo").status_code == 401
    assert ApiClient(alice).post("tool-calls/999999/undo").status_code == 404
    settings.HITL_UNDO_SECONDS = 0
    conversation, late = wrote(alice, agent, "write two to notes.txt", conversation)
    assert ApiClient(alice).post(f"tool-calls/{late.pk}/undo").json()["detail"].startswith("Too late: it could be undone until ")


def test_a_rejected_undo_may_be_asked_again_and_rules_decide_undos_too(alice, approver, agent, settings):
    conversation, call = wrote(alice, agent, "write one to notes.txt")
    conversation, call = wrote(alice, agent, "write two to notes.txt", conversation)
    first = ToolCall.objects.get(pk=ApiClient(alice).post(f"tool-calls/{call.pk}/undo").json()["id"])
    ApiClient(alice).post(f"approvals/{first.approval.pk}/decision", {"decision": "reject", "shown_hash": first.approval.shown_hash})
    Rule.objects.create(effect="deny", tool="undo", arguments={"path": "notes.txt"}, scope="global", created_by=approver)

    response = ApiClient(approver).post(f"tool-calls/{call.pk}/undo")  # an approver may undo anyone's call

    assert response.status_code == 202
    second = Approval.objects.get(tool_call_id=response.json()["id"])
    assert (second.status, second.decided_via, second.requested_by) == ("rejected", "rule", alice)
    assert second.reason.startswith(f"bob asked to undo call {call.pk} (write_file).")  # in the audit chain
    assert (sandbox(settings, conversation) / "notes.txt").read_text() == "two"


@pytest.fixture
def approver(bob):
    from approvals.permissions import approvers_group

    bob.groups.add(approvers_group())
    return bob
