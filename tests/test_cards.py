"""What a card shows a person (issue 23, its defects): a badge for every status, a question a tool
asks mid-run pushed where the page can show it, and a stale tab told who decided first."""
import asyncio
import re

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.template.loader import render_to_string

from approvals.models import Approval
from approvals.services import decide
from chat.models import ToolCall
from hitl.live import conversation_group
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("status", [choice for choice, _ in ToolCall.Status.choices])
def test_every_status_has_a_badge_that_says_it(status):
    html = render_to_string("partials/tool_status_badge.html", {"call": ToolCall(status=status)})
    text = re.sub(r"<[^>]+>", "", html).strip()
    assert text and text != status, f"{status}: {html!r}"


async def receive(layer, channel) -> dict:
    return await asyncio.wait_for(layer.receive(channel), 5)


def test_a_tools_question_mid_run_is_pushed_in_place_of_its_turn(alice, agent, tmp_path, api_as):
    """The question is a new card: pushed alone, swapped by an id the page does not have yet, it
    never showed (htmx:oobErrorNoTarget) until a reload."""
    from toolservers import discovery
    from toolservers.demo import ensure_notes_server

    discovery.refresh(ensure_notes_server(agent, notes_dir=tmp_path / "notes"))
    conversation = start(alice, agent, "title note a.txt")
    [approval] = pending_approvals(conversation)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(conversation.pk), channel)

    api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})

    [question] = pending_approvals(conversation)
    turn = question.tool_call.message
    pushed = []
    while not pushed or f'id="tool-call-{question.tool_call_id}"' not in pushed[-1]:
        try:
            pushed.append(async_to_sync(receive)(layer, channel)["html"])
        except TimeoutError:
            break
    carrying = [html for html in pushed if f'id="tool-call-{question.tool_call_id}"' in html]
    assert carrying, pushed
    assert f'<div id="message-{turn.pk}" class="message message-assistant" hx-swap-oob="true">' in carrying[0]


def test_a_stale_tab_is_told_who_decided_first_and_its_card_stops_looking_pending(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")

    response = client_for(alice).post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "shown_hash": approval.shown_hash}, headers={"HX-Request": "true"}
    )

    html = response.content.decode()
    assert response.status_code == 409
    assert "Rejected by alice via api" in html and "not now" in html
    card = re.search(rf'<article id="tool-call-{approval.tool_call_id}"[^>]*>', html)
    assert card and 'hx-swap-oob="true"' in card[0] and 'data-status="rejected"' in card[0]
    assert "Pending approval" not in html and 'id="conversation-status"' in html and "Waiting for a decision" not in html


def test_a_message_held_while_calls_waited_is_not_silently_dropped_by_a_stop(alice, agent):
    from chat import services

    conversation = start(alice, agent, "write hi to a.txt")
    services.post_message(conversation=conversation, user=alice, content="and what is 2 + 2")
    assert "will be answered once" in conversation.messages.filter(role="system").last().content

    services.stop_conversation(conversation=conversation, user=alice, via=Approval.Via.CHAT)

    notice = conversation.messages.filter(role="system").last().content
    assert notice.startswith("Stopped by alice.") and "was not answered" in notice


def test_an_approver_reading_a_conversation_sees_the_owners_messages_as_the_owners(alice, bob, agent):
    conversation = start(alice, agent, "write hi to a.txt")

    as_owner = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    as_approver = client_for(bob).get(f"/conversations/{conversation.pk}/").content.decode()

    assert 'data-viewer="owner"' in as_owner and 'data-viewer="other"' in as_approver
    assert '<span class="who-you">You</span><span class="who-name">Owner</span>' in as_approver


def test_a_card_counts_bytes_and_files_and_says_just_now_in_words(alice, bob, agent):
    from chat.previews import _bytes

    assert (_bytes(1), _bytes(2)) == ("1 byte", "2 bytes")
    start(alice, agent, "write x to a.txt")
    dashboard = client_for(bob).get("/approvals/").content.decode()
    assert "New file a.txt, 1 byte:" in dashboard and "just now" in dashboard and "0 minutes ago" not in dashboard


def test_history_says_what_each_call_acted_on_and_folds_an_edit(alice, bob, agent):
    from approvals.services import approve_edited

    first = start(alice, agent, "email bob@example.com about lunch")
    [mail] = pending_approvals(first)
    approve_edited(mail.pk, user=alice, arguments=mail.tool_call.arguments | {"to": "carol@example.com"}, via="chat", shown_hash=mail.shown_hash)
    second = start(alice, agent, "write hi to notes/a.txt")
    [write] = pending_approvals(second)
    decide(write.pk, user=alice, approve=False, via="chat", shown_hash=write.shown_hash, reason="not now")

    html = client_for(bob).get("/approvals/history/").content.decode()

    assert '<main class="page wide">' in html and "<th>Target</th>" in html
    assert '<td data-label="Target" class="target">carol@example.com</td>' in html  # what ran: the edit's address
    assert '<td data-label="Target" class="target">notes/a.txt</td>' in html
    assert re.search(r'<details class="edited"><summary>by alice</summary><pre class="edit-diff">', html)
