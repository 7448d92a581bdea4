"""Respond (issue 38, item 2; LangChain Agent Inbox's fourth answer): words sent to the agent
instead of a decision. The call is rejected as any rejection is, the words are kept as `responded`,
chained, and the model reads them as its instruction; and "Always here" undone on the card."""
import pytest

from approvals.models import Approval, Rule
from approvals.services import AlreadyDecided, InvalidAnswer, WrongKind, respond
from chat.models import ToolCall
from tests.conftest import client_for, intact, last_reply, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}


def test_respond_over_the_api_rejects_the_call_and_the_model_quotes_the_message(alice, agent, api_as):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    response = api_as(alice).post(
        f"approvals/{approval.pk}/decision", {"decision": "respond", "message": "use staging, not prod", "shown_hash": approval.shown_hash}
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["decided_via"], body["responded"]) == ("rejected", "api", "use staging, not prod")
    approval.refresh_from_db()
    assert (approval.status, approval.responded, approval.decided_by) == ("rejected", "use staging, not prod", alice)
    assert approval.tool_call.status == ToolCall.Status.REJECTED
    assert "use staging, not prod" in approval.tool_call.result  # what the model reads
    assert "use staging, not prod" in last_reply(conversation)  # and the scripted model's next turn quotes it
    assert intact().startswith("audit chain intact")  # the message is hashed into its link


def test_a_response_needs_words_and_a_tool_call(alice, agent, api_as):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    empty = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "respond", "message": "  "})

    assert empty.status_code == 400 and "what the agent should do" in empty.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == "pending"
    question = pending_approvals(start(alice, agent, "ask me to choose between tea, coffee and water"))[0]
    with pytest.raises(WrongKind):
        respond(question.pk, user=alice, via="chat", shown_hash=question.shown_hash, message="tea, obviously")
    with pytest.raises(InvalidAnswer):
        respond(approval.pk, user=alice, via="chat", shown_hash=approval.shown_hash, message="")


def test_respond_is_a_rejection_so_whoever_may_reject_may_respond(alice, mallory, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt")  # four eyes: alice may reject, not approve
    [approval] = pending_approvals(conversation)

    with pytest.raises(Approval.DoesNotExist):  # not hers to see
        respond(approval.pk, user=mallory, via="api", shown_hash=approval.shown_hash, message="do it")
    decided = respond(approval.pk, user=alice, via="chat", shown_hash=approval.shown_hash, message="archive it instead")

    assert (decided.status, decided.responded) == ("rejected", "archive it instead")


def test_a_response_posted_from_the_card_says_so_on_the_card(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    client = client_for(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'name="respond" value="1"' in page and "Send as the agent’s instruction" in page

    response = client.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "reject", "respond": "1", "reason": "write it to todo.txt instead", "shown_hash": approval.shown_hash},
        headers=HTMX,
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert "↩ Answered instead by alice via chat" in html and "write it to todo.txt instead" in html
    approval.refresh_from_db()
    assert (approval.status, approval.responded, approval.rejection_reason) == ("rejected", "write it to todo.txt instead", "")


def test_always_here_saves_the_narrowest_rule_and_the_card_undoes_it(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    client = client_for(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'class="always-form approve-only"' in page and 'name="remember_scope" value="conversation"' in page

    client.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "remember_scope": "conversation", "cond:path": "notes.txt", "shown_hash": approval.shown_hash},
        headers=HTMX,
    )

    rule = Rule.objects.get()
    assert (rule.effect, rule.scope, rule.conversation_id, rule.arguments, rule.made_from_id) == (
        "allow", "conversation", conversation.pk, {"path": "notes.txt"}, approval.pk
    )
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()  # the card as any later render shows it
    assert f"Saved as rule #{rule.pk}" in page and "Undo: remove this rule" in page
    undone = client.post(f"/rules/{rule.pk}/delete/", {"from": "card"}, headers=HTMX)
    assert undone.status_code == 200 and f"Rule #{rule.pk} removed: calls like this ask again." in undone.content.decode()
    rule.refresh_from_db()
    assert rule.deleted_at is not None
    assert "Undo: remove this rule" not in client.get(f"/conversations/{conversation.pk}/").content.decode()


def test_nobody_else_may_undo_a_rule_from_its_card(alice, bob, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    client_for(alice).post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "remember_scope": "conversation", "shown_hash": approval.shown_hash}, headers=HTMX,
    )
    rule = Rule.objects.get()

    refused = client_for(bob).post(f"/rules/{rule.pk}/delete/", {"from": "card"}, headers=HTMX)

    assert refused.status_code in (403, 404)
    rule.refresh_from_db()
    assert rule.deleted_at is None


def test_respond_is_refused_once_decided(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    respond(approval.pk, user=alice, via="chat", shown_hash=approval.shown_hash, message="no")

    with pytest.raises(AlreadyDecided):
        respond(approval.pk, user=alice, via="chat", shown_hash=approval.shown_hash, message="again")
