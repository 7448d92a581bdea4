"""The chat pages and their posts: login, per-object 404s, CSRF, decisions, escaping, query counts."""
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.models import Approval
from chat import services
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}




def test_pages_need_a_login(alice, make_conversation):
    conversation = make_conversation(alice)
    for url in ["/", f"/conversations/{conversation.pk}/"]:
        response = Client().get(url)
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")


def test_list_shows_my_conversations_with_their_status(alice, mallory, agent):
    start(alice, agent, "delete a.txt and b.txt")
    start(mallory, agent, "hello from mallory")

    page = client_for(alice).get("/").content.decode()

    assert "delete a.txt and b.txt" in page and "Waiting for approval (2)" in page
    assert "hello from mallory" not in page
    assert "write hello to notes.txt" in page  # a suggestion, one click from the first card


def test_no_suggestion_or_help_of_the_offline_model_points_outside():
    from chat.scripted import HELP, SUGGESTIONS

    assert not [text for text in SUGGESTIONS + [HELP] if "http" in text]


def test_start_from_the_form_redirects_to_the_chat(alice, agent):
    response = client_for(alice).post("/conversations/new/", {"agent": "demo", "content": "write hi to a.txt"})
    conversation = Conversation.objects.get()
    assert response.status_code == 302 and response.url == f"/conversations/{conversation.pk}/"
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL


def test_chat_page_shows_pending_cards_with_their_controls(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert page.count('data-status="pending_approval"') == 2
    assert page.count('value="approve" data-key="1"') == 2 and "Approve all (2)" in page
    assert '<span class="card-title">Delete a.txt</span>' in page and "high risk" in page
    assert "needs approval for delete_file" not in page  # the title and the risk say it: no restating


def test_another_users_conversation_is_a_404_page(alice, mallory, agent):
    conversation = start(alice, agent, "hello")
    response = client_for(mallory).get(f"/conversations/{conversation.pk}/")
    assert response.status_code == 404


def test_an_approver_can_open_someone_elses_conversation(alice, bob, agent):
    conversation = start(alice, agent, "hello")
    assert client_for(bob).get(f"/conversations/{conversation.pk}/").status_code == 200


def test_model_and_tool_text_is_escaped(alice, agent):
    conversation = start(alice, agent, "write <img src=x onerror=alert(1)> to x.html")

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_chat_page_queries_do_not_grow_with_the_conversation(alice, agent):
    small = start(alice, agent, "write a to a.txt")
    services.post_message(conversation=small, user=alice, content="yes")
    services.post_message(conversation=small, user=alice, content="write b to b.txt")  # both wait for a decision
    large = start(alice, agent, "write a to a.txt")
    for i in range(6):
        services.post_message(conversation=large, user=alice, content="yes")
        services.post_message(conversation=large, user=alice, content=f"write {i} to f{i}.txt")
    client = client_for(alice)

    counts = []
    for conversation in (small, large):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/conversations/{conversation.pk}/").status_code == 200
        counts.append(len(queries))

    assert large.messages.count() > 3 * small.messages.count()
    assert counts[0] == counts[1]


def test_decision_from_the_card_is_stored_via_chat_and_a_second_one_conflicts(alice, bob, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    first = client_for(alice).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"}, headers=HTMX)
    second = client_for(bob).post(f"/approvals/{approval.pk}/decide/", {"decision": "reject"}, headers=HTMX)

    assert first.status_code == 200 and "Approved by alice via chat" in first.content.decode()
    assert second.status_code == 409 and "Approved by alice via chat" in second.content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "chat")


def test_reject_from_the_card_keeps_the_reason(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    client_for(alice).post(f"/approvals/{approval.pk}/decide/", {"decision": "reject", "reason": "not now"}, headers=HTMX)

    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason) == ("rejected", "not now")
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.REJECTED


def test_a_plain_form_decision_redirects_back(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    page = f"http://testserver/conversations/{conversation.pk}/"

    response = client_for(alice).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"}, HTTP_REFERER=page)

    assert response.status_code == 302 and response.url == page
    approval.refresh_from_db()
    assert approval.status == "approved"


def test_decisions_need_a_csrf_token(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    client = client_for(alice, csrf=True)

    responses = [
        client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"}),
        client.post(f"/conversations/{conversation.pk}/approve-all/", {"approval_ids": [approval.pk]}),
        client.post(f"/conversations/{conversation.pk}/messages/", {"content": "yes"}),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_another_users_approval_cannot_be_decided_from_a_page(alice, mallory, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    decided = client_for(mallory).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve"})
    approved_all = client_for(mallory).post(f"/conversations/{conversation.pk}/approve-all/", {"approval_ids": [approval.pk]})

    assert (decided.status_code, approved_all.status_code) == (404, 404)
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_approve_all_decides_exactly_the_calls_shown(alice, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")
    shown = pending_approvals(conversation)[:2]

    response = client_for(alice).post(
        f"/conversations/{conversation.pk}/approve-all/", {"approval_ids": [a.pk for a in shown]}, headers=HTMX
    )

    assert response.status_code == 204
    statuses = {a.pk: a.status for a in Approval.objects.filter(conversation=conversation)}
    assert [statuses[a.pk] for a in shown] == ["approved", "approved"]
    assert list(statuses.values()).count("pending") == 1


def test_typed_message_from_the_page_runs_the_loop(alice, agent):
    conversation = start(alice, agent, "hello")

    response = client_for(alice).post(f"/conversations/{conversation.pk}/messages/", {"content": "what is 2 + 2"}, headers=HTMX)

    assert response.status_code == 200 and 'id="composer"' in response.content.decode()
    assert conversation.messages.last().content == "I did calculate 2 + 2: 2 + 2 = 4"


def test_an_empty_message_is_refused_with_a_message_in_the_composer(alice, agent):
    conversation = start(alice, agent, "hello")
    count = conversation.messages.count()

    response = client_for(alice).post(f"/conversations/{conversation.pk}/messages/", {"content": "  "}, headers=HTMX)

    assert response.status_code == 400 and "The message is empty." in response.content.decode()
    assert conversation.messages.count() == count


def test_the_refresh_after_a_reconnect_returns_the_live_part_only(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")

    fragment = client_for(alice).get(f"/conversations/{conversation.pk}/", headers=HTMX).content.decode()

    assert fragment.startswith('<div id="messages"') and "<html" not in fragment
    assert 'id="conversation-status"' in fragment and 'data-status="waiting_for_approval"' in fragment


def test_retry_restarts_a_failed_run(alice, agent):
    conversation = start(alice, agent, "hello")
    Conversation.objects.filter(pk=conversation.pk).update(status="failed", error="The model provider had an internal error.")
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "The model provider had an internal error." in page and ">Retry</button>" in page

    response = client_for(alice).post(f"/conversations/{conversation.pk}/retry/", headers=HTMX)

    assert response.status_code == 204
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE and conversation.error == ""
    assert Message.objects.filter(conversation=conversation, role="assistant").count() >= 1
