"""Edit, then approve: the edit is checked by the tool's schema and the policy again, stored beside
the requested arguments, shown as a diff, and is exactly what runs; the model is told."""
import re

import pytest

from approvals.models import Approval
from approvals.policy.calls import InvalidArguments
from approvals.services import ArgumentsChanged, approve_edited, decide
from chat.models import Conversation, Message, ToolCall
from chat.tools import arguments_hash
from tests.conftest import client_for, pending_approvals, sandbox, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def test_edited_arguments_are_what_runs_and_the_model_is_told(alice, agent, api_as, settings):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    response = api_as(alice).post(
        f"approvals/{approval.pk}/decision",
        {"decision": "approve", "arguments": {"path": "notes.txt", "content": "hello, edited"}},
    )

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "approved" and body["edited_by"] == "alice"
    assert body["arguments"] == {"path": "notes.txt", "content": "hello"}
    assert body["approved_arguments"] == {"path": "notes.txt", "content": "hello, edited"}
    approval.refresh_from_db()
    assert approval.arguments_hash == arguments_hash({"path": "notes.txt", "content": "hello"})
    assert approval.edited_arguments_hash == arguments_hash({"path": "notes.txt", "content": "hello, edited"})
    assert (sandbox(settings, conversation) / "notes.txt").read_text() == "hello, edited"
    call = ToolCall.objects.get()
    assert call.arguments == {"path": "notes.txt", "content": "hello"}  # the model's request, as it was
    assert call.result.startswith('Note: alice changed the arguments before approving (content: "hello" → "hello, edited").')


def test_an_edit_the_tool_refuses_names_the_field_and_stores_nothing(alice, agent, api_as):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    response = api_as(alice).post(
        f"approvals/{approval.pk}/decision", {"decision": "approve", "arguments": {"path": "", "content": "x"}}
    )

    assert response.status_code == 400 and "path" in response.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == "pending" and approval.edited_arguments is None


@pytest.mark.parametrize("arguments", [{"path": "notes.txt", "content": "a\x00b"}, {"path": "notes.txt", "content": "x", "\ud800": 1}])
def test_an_edit_with_text_no_database_stores_is_refused_on_every_surface_and_stores_nothing(alice, agent, arguments):
    """A NUL (PostgreSQL refuses it) or a lone surrogate (no UTF-8 for it), anywhere in an edit: refused by the
    service itself, whatever surface passed it on, before anything is written."""
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    with pytest.raises(InvalidArguments, match="NUL character or a lone UTF-16 surrogate"):
        approve_edited(approval.pk, user=alice, arguments=arguments, via="api", shown_hash=approval.shown_hash)

    approval.refresh_from_db()
    assert approval.status == "pending" and approval.edited_arguments is None


def test_an_edit_that_makes_the_call_riskier_stays_pending_for_an_approver(alice, bob, agent, api_as, settings):
    agent.owner_max_risk = "high"
    agent.save()
    conversation = start(alice, agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(conversation)
    spoofed = {"to": "bob@\u202emoc.elpmaxe", "subject": "lunch", "body": "hi"}

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "arguments": spoofed})

    assert response.status_code == 200 and response.json()["status"] == "pending"
    approval.refresh_from_db()
    assert approval.risk == "critical" and approval.approver_required and approval.edited_by == alice
    assert approval.confirmation_required and approval.confirmation_hint
    # Now only an approver other than alice may approve, and only with the confirmation.
    assert api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"}).status_code == 403
    # bob approves what he was shown: the edit, by its version (without it, the edit is unseen: 409).
    unseen = api_as(bob).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})
    assert unseen.status_code == 409 and "changed" in unseen.json()["detail"]
    seen = {"decision": "approve", "shown_hash": approval.shown_hash}
    assert api_as(bob).post(f"approvals/{approval.pk}/decision", seen).status_code == 400
    ok = api_as(bob).post(f"approvals/{approval.pk}/decision", seen | {"confirmation": approval.confirmation_hint})
    assert ok.status_code == 200 and ok.json()["approved_arguments"] == spoofed


def test_a_decision_over_arguments_edited_since_they_were_shown_decides_nothing(alice, bob, agent):
    agent.owner_max_risk = "high"
    agent.save()
    conversation = start(alice, agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(conversation)
    shown = approval.shown_hash
    approve_edited(approval.pk, user=alice, arguments={"to": "x@\u200bexample.com", "subject": "s"}, via="chat", shown_hash="")

    with pytest.raises(ArgumentsChanged):
        decide(approval.pk, user=bob, approve=True, via="dashboard", shown_hash=shown)

    approval.refresh_from_db()
    assert approval.status == "pending"


def test_the_card_edit_form_is_built_from_the_schema_and_approves_edited(alice, agent, settings):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    client = client_for(alice)

    form = client.get(f"/approvals/{approval.pk}/edit/", headers={"HX-Request": "true"})
    assert form.status_code == 200
    html = form.content.decode()
    assert 'name="arg-path"' in html and 'name="arg-content"' in html and "Approve edited" in html

    response = client.post(
        f"/approvals/{approval.pk}/edit/",
        {"arg-path": "notes.txt", "arg-content": "bye", "shown_hash": approval.shown_hash},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200 and "Approved as edited" in response.content.decode()
    assert (sandbox(settings, conversation) / "notes.txt").read_text() == "bye"
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE


def test_the_card_shows_an_edit_as_a_diff(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    approve_edited(approval.pk, user=alice, arguments={"path": "other.txt", "content": "hello"}, via="chat", shown_hash="")

    html = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert "Arguments edited by" in html
    edit = re.search(r'<figure class="edit-diff preview-diff".*?</figure>', html, re.S)[0]
    removed = re.search(r'<tr class="diff-del">.*?<td class="diff-code">(.*?)</td>', edit, re.S)
    added = re.search(r'<tr class="diff-add">.*?<td class="diff-code">(.*?)</td>', edit, re.S)
    assert (removed[1], added[1]) == ("  &quot;path&quot;: &quot;notes.txt&quot;", "  &quot;path&quot;: &quot;other.txt&quot;")
    assert edit.index("diff-del") < edit.index("diff-add") and "content" not in edit  # the content is as requested


def test_another_users_approval_cannot_be_edited(alice, mallory, agent, api_as):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    assert client_for(mallory).get(f"/approvals/{approval.pk}/edit/").status_code == 404
    response = api_as(mallory).post(
        f"approvals/{approval.pk}/decision", {"decision": "approve", "arguments": {"path": "x", "content": "y"}}
    )
    assert response.status_code == 404
    approval.refresh_from_db()
    assert approval.edited_arguments is None


def test_an_edit_post_needs_a_csrf_token(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    response = client_for(alice, csrf=True).post(f"/approvals/{approval.pk}/edit/", {"arg-path": "x", "arg-content": "y"})

    assert response.status_code == 403
    assert Message.objects.filter(conversation=conversation).count() == 2
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_an_approver_edits_and_approves_from_the_dashboard(alice, bob, agent, settings):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    client = client_for(bob)
    dashboard = client.get("/approvals/").content.decode()
    assert "New file notes.txt, 5 bytes" in dashboard  # the preview, on the row
    assert f'/approvals/dashboard/{approval.pk}/edit/' in dashboard and "Stop conversation" in dashboard

    response = client.post(
        f"/approvals/dashboard/{approval.pk}/edit/",
        {"arg-path": "notes.txt", "arg-content": "from the dashboard"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via, approval.edited_by) == ("approved", bob, "dashboard", bob)
    assert (sandbox(settings, conversation) / "notes.txt").read_text() == "from the dashboard"
    history = client.get("/approvals/history/").content.decode()
    assert '<span class="diff-add">+  &quot;content&quot;: &quot;from the dashboard&quot;,</span>' in history
