"""What people see of calls from outside (chat.outside): an approval request's card reads finished
and clear in each state (pending, approved with no report yet, reported succeeded or failed,
allowed by policy, rejected), an outside conversation has no composer but says where its calls come
from, and the inbox, the history, the conversation list and the admin mark them."""
import re

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import Approval, Outcome
from chat import outside
from chat.models import Conversation, Message, ToolCall
from core.live import conversation_group
from tests.conftest import client_for, receive

pytestmark = pytest.mark.django_db(transaction=True)


def ask(api, **fields) -> dict:
    body = {"agent": "demo", "tool": "deploy", "arguments": {"service": "web", "version": "1.2"}, "thread": "ticket-42"} | fields
    response = api.post("approval-requests", body)
    assert response.status_code == 201, response.content
    return response.json()


def approve(api, body: dict) -> dict:
    response = api.post(f"approvals/{body['id']}/decision", {"decision": "approve", "shown_hash": body["shown_hash"]})
    assert response.status_code == 200, response.content
    return body | response.json()  # the approved version's shown_hash


def report(api, body: dict, status: str = "succeeded", result: str = "deployed 1.2") -> None:
    response = api.post(f"approvals/{body['id']}/outcome", {"status": status, "result": result, "shown_hash": body["shown_hash"]})
    assert response.status_code == 200, response.content


def card_of(page: str, body: dict) -> str:
    """The card of the request's call, as the page shows it."""
    call_id = ToolCall.objects.get(approval__pk=body["id"]).pk
    found = re.search(rf'<article id="tool-call-{call_id}".*?</article>', page, re.S)
    assert found, page
    return found.group(0)


def conversation_page(user, body: dict) -> str:
    response = client_for(user).get(f"/conversations/{body['conversation']}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_pending_request_reads_pending_and_its_conversation_says_where_it_comes_from(alice, gated_deploy, api_as):
    body = ask(api_as(alice), reason="Ship the fix")

    page = conversation_page(alice, body)

    card = card_of(page, body)
    assert "● Pending approval" in card and 'data-status="pending_approval"' in card
    assert "Approval requests from an outside agent, through the JSON API" in page
    assert '<code class="thread">ticket-42</code>' in page
    assert 'id="composer"' not in page and 'name="content"' not in page  # nobody chats here
    assert "outside-waiting" in page and "■ Stop" in page  # the bar's Stop, shown while a card waits


def test_an_approved_request_nobody_reported_reads_approved_and_outcome_unknown(alice, bob, gated_deploy, api_as):
    body = ask(api_as(alice))
    approve(api_as(bob), body)

    card = card_of(conversation_page(alice, body), body)

    assert "✔ Approved · awaiting the agent’s report" in card
    assert "Outcome unknown: the agent runs this call itself" in card
    assert "✓ Approved by bob via api" in card
    assert ToolCall.objects.get(approval__pk=body["id"]).status == ToolCall.Status.APPROVED


def test_a_reported_success_shows_its_result_and_who_reported_it(alice, bob, gated_deploy, api_as):
    body = ask(api_as(alice))
    body = approve(api_as(bob), body)
    report(api_as(alice), body, "succeeded", "deployed <b>1.2</b>")

    card = card_of(conversation_page(bob, body), body)

    assert "✓ Succeeded · as reported" in card
    assert "Reported succeeded by alice" in card
    assert "deployed &lt;b&gt;1.2&lt;/b&gt;" in card  # what the caller wrote is escaped like all else
    assert "awaiting" not in card and "Outcome unknown" not in card
    assert Outcome.objects.get().reported_by == alice


def test_a_reported_failure_shows_the_error_and_who_reported_it(alice, bob, gated_deploy, api_as):
    body = approve(api_as(bob), ask(api_as(alice)))
    report(api_as(alice), body, "failed", "exit status 2")

    card = card_of(conversation_page(alice, body), body)

    assert "✗ Failed · as reported" in card and "Reported failed by alice" in card
    assert '<details class="result error" open><summary>Error</summary><pre>exit status 2</pre>' in card


def test_a_call_the_policy_does_not_gate_reads_allowed_by_policy(alice, agent, api_as):
    body = ask(api_as(alice), tool="read_dashboard", arguments={})

    card = card_of(conversation_page(alice, body), body)

    assert body["decided_via"] == "policy"
    assert "✓ Allowed by policy: this agent asks no human for this tool" in card
    assert "✔ Approved · awaiting the agent’s report" in card
    assert "by the system via policy" not in card


def test_a_rejected_request_reads_rejected_with_the_reason_and_no_outcome_line(alice, bob, gated_deploy, api_as):
    body = ask(api_as(alice))
    api_as(bob).post(f"approvals/{body['id']}/decision", {"decision": "reject", "reason": "Not on a Friday", "shown_hash": body["shown_hash"]})

    card = card_of(conversation_page(alice, body), body)

    assert "⊘ Rejected" in card and "Not on a Friday" in card
    assert "outside-outcome" not in card and "awaiting" not in card


def test_posting_in_an_outside_conversation_is_refused_and_stores_nothing(alice, gated_deploy, api_as):
    body = ask(api_as(alice))
    messages = Message.objects.filter(conversation_id=body["conversation"]).count()
    client = client_for(alice)

    plain = client.post(f"/conversations/{body['conversation']}/messages/", {"content": "yes"})
    htmx = client.post(f"/conversations/{body['conversation']}/messages/", {"content": "approve all 1"}, headers={"HX-Request": "true"})

    assert plain.status_code == 400 and htmx.status_code == 400
    assert "decide them on their cards" in plain.content.decode()
    assert Message.objects.filter(conversation_id=body["conversation"]).count() == messages
    assert Approval.objects.get(pk=body["id"]).status == Approval.Status.PENDING
    assert Conversation.objects.get(pk=body["conversation"]).status == Conversation.Status.IDLE


def test_the_stop_button_cancels_what_is_pending(alice, gated_deploy, api_as):
    first, second = ask(api_as(alice)), ask(api_as(alice), arguments={"service": "db"})

    response = client_for(alice, csrf=False).post(f"/conversations/{first['conversation']}/stop/")

    assert response.status_code == 302
    assert set(Approval.objects.filter(pk__in=[first["id"], second["id"]]).values_list("status", flat=True)) == {"cancelled"}


def test_an_mcp_clients_conversation_says_it_holds_its_calls_and_where_they_come_through(alice, agent):
    conversation = outside.conversation_for(alice, agent, source=Conversation.Source.MCP, thread="MCP client (token 7f3a)")

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert "Tool calls from an MCP client" in page and "/mcp/demo/" in page and "MCP client (token 7f3a)" in page
    assert 'id="composer"' not in page
    assert "source-mcp" in page


def test_the_page_reads_reported_outcomes_in_a_constant_number_of_queries(alice, bob, gated_deploy, api_as):
    def page_queries(body) -> int:
        client = client_for(alice)
        client.get(f"/conversations/{body['conversation']}/")  # the session's first read
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/conversations/{body['conversation']}/").status_code == 200
        return len(queries)

    def finished_request() -> dict:
        body = approve(api_as(bob), ask(api_as(alice)))
        report(api_as(alice), body)
        return body

    first = finished_request()
    ask(api_as(alice))  # and one pending, one approved, one by policy
    approve(api_as(bob), ask(api_as(alice)))
    ask(api_as(alice), tool="read_dashboard", arguments={})
    few = page_queries(first)

    for _ in range(4):
        finished_request()
    ask(api_as(alice))
    approve(api_as(bob), ask(api_as(alice)))
    ask(api_as(alice), tool="read_dashboard", arguments={})
    many = page_queries(first)

    assert few == many
    assert conversation_page(alice, first).count("Reported succeeded by alice") == 5


def test_the_card_pushed_when_the_outcome_is_reported_says_so(alice, bob, gated_deploy, api_as):
    body = approve(api_as(bob), ask(api_as(alice)))
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(body["conversation"]), channel)

    report(api_as(alice), body, "succeeded", "deployed")

    pushed = async_to_sync(receive)(layer, channel)["html"]
    assert "✓ Succeeded · as reported" in pushed and "Reported succeeded by alice" in pushed


def test_the_inbox_and_the_history_mark_calls_from_outside(alice, bob, gated_deploy, api_as):
    waiting = ask(api_as(alice))
    unknown = approve(api_as(bob), ask(api_as(alice), arguments={"service": "db"}))
    reported = approve(api_as(bob), ask(api_as(alice), arguments={"service": "cache"}))
    report(api_as(alice), reported)

    inbox = client_for(bob).get("/approvals/").content.decode()
    history = client_for(bob).get("/approvals/history/").content.decode()

    row = re.search(rf'<article id="approval-row-{waiting["id"]}".*?</summary>', inbox, re.S).group(0)
    assert "source-api" in row and "API</span>" in row
    assert "once approved, the agent runs this call itself and reports back" in inbox
    unknown_row = re.search(rf'<tr id="history-{unknown["id"]}">.*?</tr>', history, re.S).group(0)
    reported_row = re.search(rf'<tr id="history-{reported["id"]}">.*?</tr>', history, re.S).group(0)
    assert "not reported yet" in unknown_row and "source-api" in unknown_row
    assert "reported succeeded" in reported_row


def test_the_conversation_list_marks_outside_conversations_and_what_waits_in_them(alice, gated_deploy, api_as):
    body = ask(api_as(alice))
    ask(api_as(alice), arguments={"service": "db"})

    page = client_for(alice).get("/").content.decode()

    item = re.search(rf'<li>\s*<a href="/conversations/{body["conversation"]}/">.*?</li>', page, re.S).group(0)
    assert "source-api" in item and "Waiting for approval (2)" in item and "Idle" not in item


def test_auditors_filter_conversations_by_source_and_read_reported_outcomes(alice, bob, gated_deploy, api_as):
    body = approve(api_as(bob), ask(api_as(alice)))
    report(api_as(alice), body, "failed", "exit status 2")
    auditor = User.objects.create_superuser("auditor", password="auditor-password")
    client = client_for(auditor)

    outside_only = client.get("/admin/chat/conversation/", {"source": "api"})
    chats_only = client.get("/admin/chat/conversation/", {"source": "chat"})
    outcomes = client.get("/admin/approvals/outcome/")
    outcome_page = client.get(f"/admin/approvals/outcome/{Outcome.objects.get().pk}/change/")
    approval_page = client.get(f"/admin/approvals/approval/{body['id']}/change/")

    assert outside_only.status_code == chats_only.status_code == 200
    assert body["conversation"] in outside_only.content.decode() and body["conversation"] not in chats_only.content.decode()
    assert outcomes.status_code == 200 and "deploy" in outcomes.content.decode()
    assert outcome_page.status_code == 200 and "exit status 2" in outcome_page.content.decode()
    assert approval_page.status_code == 200 and "exit status 2" in approval_page.content.decode()
    assert client.post(f"/admin/approvals/outcome/{Outcome.objects.get().pk}/delete/").status_code == 403
    assert Outcome.objects.count() == 1


def test_a_chat_call_whose_model_named_it_like_an_outside_one_still_reads_as_the_loops(alice, make_conversation):
    conversation = make_conversation(alice)
    turn = Message.objects.create(conversation=conversation, position=1, role="assistant")
    ToolCall.objects.create(message=turn, position=0, call_id="api-from-the-model", name="calculator", arguments={}, status="approved")

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert "✔ Approved</span>" in page and "awaiting" not in page and "outside-origin" not in page
    assert 'id="composer"' in page


def test_retry_in_an_outside_conversation_is_refused_not_a_server_error(alice, gated_deploy, api_as):
    body = ask(api_as(alice))

    response = client_for(alice).post(f"/conversations/{body['conversation']}/retry/")

    assert response.status_code == 400 and "decide them on their cards" in response.content.decode()
    assert Conversation.objects.get(pk=body["conversation"]).status == Conversation.Status.IDLE


def test_another_user_neither_sees_nor_stops_an_outside_conversation(alice, mallory, gated_deploy, api_as):
    body = ask(api_as(alice))
    client = client_for(mallory)

    assert client.get(f"/conversations/{body['conversation']}/").status_code == 404
    assert client.post(f"/conversations/{body['conversation']}/stop/").status_code == 404
    assert client.post(f"/conversations/{body['conversation']}/messages/", {"content": "yes"}).status_code == 404
    assert Approval.objects.get(pk=body["id"]).status == Approval.Status.PENDING


def test_what_the_caller_wrote_is_shown_escaped_with_invisible_characters_spelled_out(alice, bob, gated_deploy, api_as):
    thread = '<img src=x onerror="alert(1)">\u202e'
    body = approve(api_as(bob), ask(api_as(alice), thread=thread, reason="<b>now</b>"))
    report(api_as(alice), body, "failed", "<script>alert(2)</script>\u200b")

    page = conversation_page(alice, body)

    assert "<img src=x" not in page and "<script>alert(2)" not in page and "<b>now</b>" not in page
    assert '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;⟨U+202E⟩</code>' in page  # the origin line
    assert "&lt;script&gt;alert(2)&lt;/script&gt;⟨U+200B⟩" in page
