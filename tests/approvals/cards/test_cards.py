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
from core.live import conversation_group
from tests.approvals.conftest import member
from tests.conftest import client_for, pending_approvals, receive, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}


@pytest.mark.parametrize("status", [choice for choice, _ in ToolCall.Status.choices])
def test_every_status_has_a_badge_that_says_it(status):
    html = render_to_string("partials/tool_status_badge.html", {"call": ToolCall(status=status)})
    text = re.sub(r"<[^>]+>", "", html).strip()
    assert text and text != status, f"{status}: {html!r}"


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

    assert '<main class="page wide">' in html and "<th>Call</th>" in html
    assert re.search(r'class="call-title" href="[^"]*">Send an email to carol@example\.com\b', html)  # what ran: the edit's address
    assert re.search(r'class="call-title" href="[^"]*">Write notes/a\.txt\b', html)
    assert re.search(r'<details class="edited"><summary>by alice</summary><pre class="edit-diff">', html)


# --- The card read in one second (issue 23, item 2) ----------------------------------------------


def card_html(page: str, approval) -> str:
    start_at = page.index(f'<article id="tool-call-{approval.tool_call_id}"')
    return page[start_at : page.index("</article>", start_at)]


def text_of(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def test_a_pending_card_says_what_will_happen_first_and_folds_the_arguments(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    card = card_html(page, approval)

    assert re.search(
        rf'<article id="tool-call-{approval.tool_call_id}" class="[^"]*" data-status="pending_approval" data-tool="write_file"\s+'
        rf'data-approval-id="{approval.pk}" data-risk="medium" data-target="notes.txt" tabindex="-1" data-title="Write notes.txt \(5 bytes\)"',
        card,
    )
    assert '<span class="card-title">Write notes.txt (5 bytes)</span>' in card and "medium risk" in card
    assert card.index("card-title") < card.index('class="preview') < card.index("<summary>Arguments</summary>") < card.index('class="decision action-row"')
    assert '<details class="fold arguments-fold"><summary>Arguments</summary><pre class="arguments"' in card
    assert "needs approval" not in card and "Needs approval" not in card
    assert "{#" not in page and "#}" not in page


def test_constraints_are_one_banner_at_the_top_of_the_card(alice, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(conversation)

    card = card_html(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)

    banner = re.search(r'<p class="card-banner" role="note">(.*?)</p>', card, re.S)
    assert banner and card.index("card-banner") < card.index('class="preview')
    assert "⚑ Four eyes: an approver other than alice must approve this high-risk call" in text_of(banner[1])
    assert "Expires at" in text_of(banner[1]) and 'class="time-left"' in banner[1]
    assert card.count("Four eyes") == 1 and card.count("Expires at") == 1


def test_a_critical_call_says_so_in_the_banner_and_asks_for_its_confirmation_by_the_buttons(alice, agent):
    conversation = start(alice, agent, "delete all files")
    [approval] = pending_approvals(conversation)

    card = card_html(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)

    assert "⚠ Critical: approving takes a typed confirmation." in text_of(card)
    assert card.index("card-banner") < card.index(f'id="confirm-{approval.pk}"') < card.index('class="decision action-row"')
    assert f'form="approve-{approval.pk}"' in card and "Delete every file in the sandbox" in card


def test_the_action_row_holds_approve_always_reject_and_edit_with_their_keys_and_what_they_open_comes_below(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    card = card_html(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)
    row = re.search(r'<div class="decision action-row"[^>]*>(.*?)\n  </div>', card, re.S)[1]

    buttons = re.findall(r"<(?:button|a) [^>]*>.*?</(?:button|a)>", row, re.S)
    assert [text_of(button) for button in buttons] == ["Approve1", "Always here2", "Reject3", "Edite"]  # each with its key
    assert [re.search(r'data-key="(\w)"', button)[1] for button in buttons] == ["1", "2", "3", "e"]
    assert 'class="btn approve-quiet always"' in buttons[1]  # quieter than Approve
    after = card[card.index(row) + len(row):]
    assert "More ways to decide calls like this…" in after  # every other way to remember, one link below the row
    assert f'<form id="reject-{approval.pk}" class="reject-form stack" hidden' in after
    assert f'<div id="remember-{approval.pk}" class="remember" hidden' in after


def test_a_decided_card_is_one_line_of_what_happened_and_by_whom(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=bob, approve=False, via="dashboard", shown_hash=approval.shown_hash, reason="keep it")

    card = card_html(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)

    decided = re.findall(r'<p class="decided[^"]*">(.*?)</p>', card, re.S)
    assert len(decided) == 1
    assert re.fullmatch(r"⊘ Rejected by bob via dashboard · \d\d:\d\d:\d\d: “keep it”", text_of(decided[0]))
    assert 'class="decision action-row"' not in card and "Pending approval" not in card
    assert card.count("<details") == 1 and '<details class="fold details-fold"><summary>Details</summary>' in card
    assert "Preview, as shown when decided" in card and "Why it was asked" in card
    assert text_of(card).count("Rejected") == 1  # said once: no badge beside the line


def test_after_an_approved_edit_the_card_shows_what_ran_and_keeps_the_diff(alice, agent):
    from approvals.services import approve_edited

    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    approve_edited(approval.pk, user=alice, arguments={"path": "notes.txt", "content": "hello, edited"}, via="chat", shown_hash=approval.shown_hash)

    card = card_html(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(), approval)

    assert '<span class="card-title">Write notes.txt (13 bytes)</span>' in card
    arguments = re.search(r'>Arguments, as edited and approved</p><pre class="arguments"[^>]*>(.*?)</pre>', card, re.S)
    assert arguments and "hello, edited" in arguments[1] and "&quot;hello&quot;" not in arguments[1]
    assert 'class="edit-diff preview-diff"' in card and "✓ Approved as edited by alice via chat" in text_of(card)


def test_the_edit_form_edits_prose_in_a_text_area_with_a_live_diff(alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    html = client_for(alice).get(f"/approvals/{approval.pk}/edit/", headers={"HX-Request": "true"}).content.decode()

    assert re.search(rf'<textarea name="arg-content" id="edit-{approval.pk}-content" rows="3" data-argument="content" data-widget="text">\nhello</textarea>', html)
    assert f'<input type="text" name="arg-path" id="edit-{approval.pk}-path" value="notes.txt"' in html
    assert f'data-live-diff="edit-diff-{approval.pk}"' in html and f'<div id="edit-diff-{approval.pk}" class="live-rows"' in html
    assert 'data-file-argument="content"' in html and "Your changes to the file (− requested, + edited)" in html  # its lines, not its JSON
    assert f'data-approval="{approval.pk}" data-title-url="/approvals/{approval.pk}/edit/title/"' in html
    assert 'data-requested="{&quot;path&quot;: &quot;notes.txt&quot;, &quot;content&quot;: &quot;hello&quot;}"' in html
    assert "{#" not in html


@pytest.mark.parametrize("message", ["delete a.txt", "ask me to choose between tea, coffee and water", "plan a tidy-up of the notes"])
def test_no_card_or_push_shows_template_comments(alice, agent, message):
    from approvals.cards.fragments import approval_controls_html
    from chat.fragments import tool_card_html

    conversation = start(alice, agent, message)
    [approval] = pending_approvals(conversation)
    pushed = tool_card_html(approval.tool_call, oob=True) + approval_controls_html(approval, can_decide=None, via="dashboard")
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    for html in (pushed, page):
        assert "{#" not in html and "#}" not in html


# Routes, quorum, delegation (issue 25): what a routed card tells each viewer


def finance_route(agent, quorum: int = 2, **fields):
    """A route of every gated call of `agent` to the finance group."""
    from django.contrib.auth.models import Group

    from approvals.deciders.routemaking import create_route

    for name in ["finance", *fields.get("escalate_to", [])]:
        Group.objects.get_or_create(name=name)
    return create_route(created_by=None, agent=agent.slug, approvers=["finance"], quorum=quorum, **fields)


def routed_call(owner, agent, text: str = "delete a.txt") -> tuple:
    conversation = start(owner, agent, text)
    [approval] = pending_approvals(conversation)
    assert approval.route_id is not None and approval.approver_required
    return conversation, approval


def card_for(user, conversation, approval) -> str:
    response = client_for(user).get(f"/conversations/{conversation.pk}/")
    assert response.status_code == 200
    return card_html(response.content.decode(), approval)


def test_a_vote_leaves_the_card_pending_for_the_others_and_tells_the_voter_their_vote_counts(alice, agent):
    dana, erin = member("dana", "finance"), member("erin", "finance")
    finance_route(agent)
    conversation, approval = routed_call(alice, agent)

    response = client_for(dana).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "shown_hash": approval.shown_hash}, headers=HTMX)

    assert response.status_code == 200
    approval.refresh_from_db()
    assert approval.status == "pending" and [vote.user for vote in approval.votes.all()] == [dana]
    mine = text_of(response.content.decode())
    assert "You approved · 1 of 2" in mine and "1 of 2 approvals: dana" in mine and 'value="approve"' not in response.content.decode()
    assert "You approved · 1 of 2" in text_of(card_for(dana, conversation, approval))
    theirs = card_for(erin, conversation, approval)
    assert 'value="approve" data-key="1"' in theirs and "1 of 2 approvals: dana" in text_of(theirs) and "You approved" not in theirs


def test_who_sees_a_routed_call_but_may_not_decide_it_is_told_why(alice, bob, agent):
    member("dana", "finance")
    finance_route(agent)
    conversation, approval = routed_call(alice, agent)

    owners = card_for(alice, conversation, approval)
    assert "Needs 2 approvals from finance (alice may still reject it)." in text_of(owners)
    assert 'value="approve"' not in owners and 'value="reject"' in owners  # the owner's veto
    outsiders = card_for(bob, conversation, approval)  # a global approver outside the route's groups
    assert "Needs 2 approvals from finance" in text_of(outsiders) and "Waiting for finance." in text_of(outsiders)
    assert 'value="approve"' not in outsiders and 'value="reject"' not in outsiders


def test_an_escalated_card_says_so_and_names_the_escalation_group_too(alice, bob, agent):
    from django.utils import timezone

    finance_route(agent, escalate_after_seconds=60, escalate_to=["oncall"])
    conversation, approval = routed_call(alice, agent)
    Approval.objects.filter(pk=approval.pk).update(escalated_at=timezone.now())

    card = text_of(card_for(bob, conversation, approval))
    assert "escalated" in card and "Needs 2 approvals from finance or oncall" in card


def test_the_last_vote_decides_once_and_the_decided_card_lists_the_votes_and_whom_a_delegate_decided_for(alice, agent):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.deciders import delegations

    dana, erin, hank = member("dana", "finance"), member("erin", "finance"), member("hank")
    finance_route(agent)
    delegations.delegate(erin, to="hank", starts_at=timezone.now() - timedelta(minutes=1), ends_at=timezone.now() + timedelta(hours=1))
    conversation, approval = routed_call(alice, agent)

    decide(approval.pk, user=dana, approve=True, via="dashboard", shown_hash=approval.shown_hash)
    response = client_for(hank).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "shown_hash": approval.shown_hash}, headers=HTMX)

    assert response.status_code == 200
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decided_by == hank and approval.on_behalf_of == erin
    card = text_of(card_for(alice, conversation, approval))
    assert re.search(r"✓ Approved by hank for erin via chat · \d\d:\d\d:\d\d", card)
    assert "2 of 2 approvals: dana, hank for erin" in card


def test_a_second_vote_by_the_same_person_is_refused_with_a_conflict(alice, agent):
    dana = member("dana", "finance")
    member("erin", "finance")
    finance_route(agent)
    _, approval = routed_call(alice, agent)
    decide(approval.pk, user=dana, approve=True, via="chat", shown_hash=approval.shown_hash)

    again = client_for(dana).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "shown_hash": approval.shown_hash}, headers=HTMX)

    assert again.status_code == 409 and "already voted" in again.content.decode()
    assert approval.votes.count() == 1


def test_a_vote_pushes_the_cards_votes_line_to_the_conversation(alice, agent):
    dana = member("dana", "finance")
    finance_route(agent)
    conversation, approval = routed_call(alice, agent)
    layer = get_channel_layer()
    chat = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(conversation.pk), chat)

    client_for(dana).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "shown_hash": approval.shown_hash}, headers=HTMX)

    line = async_to_sync(receive_within)(layer, chat)["html"]
    assert f'<p id="votes-{approval.pk}" class="votes-line" hx-swap-oob="true">' in line
    assert text_of(line) == "1 of 2 approvals: dana"


async def receive_within(layer, channel) -> dict:
    return await asyncio.wait_for(layer.receive(channel), 5)


def test_a_routed_chat_page_reads_its_votes_and_groups_in_a_constant_number_of_queries(alice, agent):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    dana = member("dana", "finance")
    finance_route(agent)

    def queries_of_page(text: str) -> int:
        conversation = start(alice, agent, text)
        for approval in pending_approvals(conversation):
            decide(approval.pk, user=dana, approve=True, via="chat", shown_hash=approval.shown_hash)
        with CaptureQueriesContext(connection) as queries:
            page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
        assert "1 of 2 approvals: dana" in text_of(page)
        return len(queries)

    assert queries_of_page("delete a.txt") == queries_of_page("delete a.txt, b.txt and c.txt")


def test_an_escalation_pushes_the_escalated_mark_to_the_conversation(alice, agent, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.deciders import escalation

    finance_route(agent, escalate_after_seconds=60, escalate_to=["oncall"])
    conversation, approval = routed_call(alice, agent)
    layer = get_channel_layer()
    chat = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(conversation.pk), chat)

    with django_capture_on_commit_callbacks(execute=True):
        assert escalation.escalate_due(now=timezone.now() + timedelta(seconds=61)) == [approval.pk]

    line = async_to_sync(receive_within)(layer, chat)["html"]
    assert f'<p id="votes-{approval.pk}" class="votes-line" hx-swap-oob="true">' in line
    assert text_of(line) == "escalated 0 of 2 approvals"
