"""Critical calls need their typed confirmation on every surface; bulk decisions skip them and say so.
Hard deadlines; the owner may always say no; invisible characters are shown and raise the risk."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Approval
from approvals.services import AlreadyDecided, ConfirmationRequired, decide, decide_many
from chat import services
from chat.models import Conversation, ToolCall
from tests.conftest import client_for, pending_approvals, sandbox, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def test_delete_all_files_is_critical_and_runs_only_with_its_confirmation(alice, agent, api_as, settings):
    conversation = Conversation.objects.create(owner=alice, agent=agent)
    box = sandbox(settings, conversation)
    box.mkdir(parents=True)
    (box / "a.txt").write_text("a")
    services.post_message(conversation=conversation, user=alice, content="delete all files")
    [approval] = pending_approvals(conversation)
    assert "a.txt" in approval.preview["text"]
    body = api_as(alice).get("approvals", status="pending").json()["items"][0]
    assert (body["risk"], body["confirmation_required"], body["confirmation_hint"]) == ("critical", True, "DELETE")

    refused = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "confirmation": "delete"})
    assert refused.status_code == 400 and "DELETE" in refused.json()["detail"]
    assert (box / "a.txt").exists()

    ok = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "confirmation": "DELETE"})

    assert ok.status_code == 200 and ok.json()["status"] == "approved"
    assert not (box / "a.txt").exists()
    assert ToolCall.objects.get().result == "Deleted 1 file(s): a.txt."


def test_bulk_decisions_and_approve_all_skip_critical_calls_and_say_so(alice, agent, api_as):
    conversation = start(alice, agent, "delete all files")
    [approval] = pending_approvals(conversation)

    bulk = api_as(alice).post("approvals/decisions", {"ids": [approval.pk], "decision": "approve"})
    every = api_as(alice).post(f"conversations/{conversation.pk}/approve-all", {"ids": [approval.pk]})

    assert bulk.json()["needs_confirmation"] == [approval.pk] and bulk.json()["decided"] == []
    assert every.json() == {"approved": [], "needs_confirmation": [approval.pk]}
    approval.refresh_from_db()
    assert approval.status == "pending"
    # Rejecting needs no confirmation.
    assert decide_many(dict.fromkeys([approval.pk], ""), user=alice, approve=False, via="api").decided


def test_the_card_asks_for_the_confirmation_and_the_page_post_checks_it(alice, agent):
    conversation = start(alice, agent, "delete all files")
    [approval] = pending_approvals(conversation)
    client = client_for(alice)
    html = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'data-confirmation-hint="DELETE"' in html

    wrong = client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "confirmation": "nope"}, headers={"HX-Request": "true"})
    assert wrong.status_code == 400 and "Type" in wrong.content.decode()
    right = client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "confirmation": "DELETE"}, headers={"HX-Request": "true"})
    assert right.status_code == 200
    approval.refresh_from_db()
    assert approval.status == "approved"


def test_a_decision_after_the_deadline_expires_the_approval_even_before_the_sweep(alice, agent, api_as):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})

    assert response.status_code == 409 and response.json()["status"] == "expired"
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("expired", "timeout")
    assert ToolCall.objects.get().status == ToolCall.Status.EXPIRED
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE


def test_a_bulk_decision_after_the_deadline_expires_instead(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    outcome = decide_many(dict.fromkeys([approval.pk], ""), user=alice, approve=True, via="api")

    assert outcome.decided == [] and outcome.already_decided == [approval.pk]
    approval.refresh_from_db()
    assert approval.status == "expired"


def test_the_owner_may_reject_a_four_eyes_call_but_not_approve_it(alice, ops_agent, api_as):
    conversation = start(alice, ops_agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)

    assert api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "approve"}).status_code == 403
    response = api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "reject", "reason": "no"})

    assert response.status_code == 200 and response.json()["status"] == "rejected"
    html = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert f'aria-controls="reject-{second.pk}"' in html  # the card offers Reject to the owner
    assert f'hx-post="/approvals/{second.pk}/decide/"' in html


def test_a_bidi_character_is_shown_escaped_and_raises_the_risk(alice, agent, api_as, settings):
    conversation = start(alice, agent, 'call send_email with {"to": "bob@\u202emoc.elpmaxe", "subject": "hi"}')
    [approval] = pending_approvals(conversation)

    assert approval.risk == "critical" and approval.confirmation_required
    html = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    card = html[html.index(f'id="tool-call-{approval.tool_call_id}"'):]
    assert "bob@⟨U+202E⟩moc.elpmaxe" in card and "\u202e" not in card
    assert "invisible or direction-changing characters" in card


def test_a_critical_call_needs_the_confirmation_even_from_an_approver(alice, bob, agent):
    conversation = start(alice, agent, "delete all files")
    [approval] = pending_approvals(conversation)

    with pytest.raises(ConfirmationRequired):
        decide(approval.pk, user=bob, approve=True, via="dashboard", shown_hash="")
    decide(approval.pk, user=bob, approve=True, via="dashboard", confirmation=" DELETE ", shown_hash="")

    with pytest.raises(AlreadyDecided):
        decide(approval.pk, user=alice, approve=False, via="chat", shown_hash="")
