"""What the pages tell a person who reads them in order, as a screen reader or the keyboard meets
them: "Approve all" after the cards it approves, the four-eyes owner told what they can do (not to
type "approve all N"), and the rules page saying what a change did."""
import pytest

from django.contrib.auth.models import Group

from approvals.cards.fragments import claim_html
from approvals.deciders.routemaking import create_route
from approvals.models import Approval, Rule
from approvals.policy import rulemaking
from tests.conftest import client_for, pending_approvals
from tests.conftest import start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)  # the loop runs (eagerly) on commit

HTMX = {"HX-Request": "true"}


def status_bar(html: str) -> str:
    start_at = html.index('id="conversation-status"')
    return html[start_at:html.index("</div>", start_at)]


def test_approve_all_comes_after_the_cards_it_approves(alice, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")
    approvals = pending_approvals(conversation)
    assert len(approvals) == 3
    html = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    approve_all = html.index("Approve all (3)")
    assert all(html.index(f'id="tool-call-{approval.tool_call_id}"') < approve_all for approval in approvals)


def test_the_four_eyes_owner_is_told_to_reject_or_wait_not_to_approve_all(alice, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt and b.txt")
    assert len(pending_approvals(conversation)) == 2
    bar = status_bar(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode())

    assert "approve all" not in bar.lower() and "Approve all" not in bar
    assert "Waiting for an approver" in bar
    assert "Only an approver other than you may approve these 2 calls" in bar
    assert "reject all 2 because" in bar


def test_an_owner_who_may_approve_is_still_told_how_to_type_a_decision(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    assert len(pending_approvals(conversation)) == 2
    bar = status_bar(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode())

    assert "Waiting for a decision." in bar and "“approve all 2”" in bar


def test_with_one_call_waiting_the_owner_is_told_to_type_yes_or_no(alice, agent):
    conversation = start(alice, agent, "delete a.txt")
    bar = status_bar(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode())

    assert "Decide on the card<" in bar and "“yes” or “no, because …”" in bar and "approve all" not in bar


def test_a_critical_call_is_never_offered_to_a_typed_yes(alice, agent):
    critical = start(alice, agent, "delete all files")
    bar = status_bar(client_for(alice).get(f"/conversations/{critical.pk}/").content.decode())
    assert "a critical call is approved only there, with its confirmation typed" in bar
    assert "“yes”" not in bar and "“no, because …” below rejects it" in bar

    mixed = start(alice, agent, "delete a.txt and b.txt")
    Approval.objects.filter(pk=pending_approvals(mixed)[0].pk).update(risk="critical")  # one of two made critical
    bar = status_bar(client_for(alice).get(f"/conversations/{mixed.pk}/").content.decode())
    assert "a critical call is approved only on its card, with its confirmation typed" in bar
    assert "“approve all 2” below approves the others" in bar


def test_a_routed_call_says_who_must_approve_it_not_that_another_approver_may(alice, agent):
    Group.objects.create(name="finance")
    create_route(created_by=None, agent=agent.slug, tool="delete_file", approvers=["finance"], quorum=2)
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.route_id is not None

    bar = status_bar(client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode())

    assert "Waiting for 2 approvals from finance." in bar
    assert "Only an approver other than you" not in bar and "“yes”" not in bar
    assert "You may reject it on its card" in bar


def test_a_pushed_claim_is_marked_for_others_so_the_owner_never_sees_claim_on_their_own_card(alice, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    pushed = claim_html(approval, can_decide=None, oob=True)
    own_page = client_for(alice).get(f"/conversations/{approval.conversation_id}/").content.decode()

    assert 'class="claim-form for-others"' in pushed
    assert f'id="claim-{approval.pk}"' in own_page and "claim-form" not in own_page.split(f'id="claim-{approval.pk}"')[1].split("</div>")[0]
    assert 'data-viewer="owner"' in own_page  # app.css hides a pushed .claim-form.for-others there


def test_the_rules_page_says_what_a_change_did(alice, agent):
    rule = rulemaking.create(alice, effect="allow", tool="write_file", arguments={}, scope=Rule.Scope.AGENT_USER, agent=agent.slug)
    client = client_for(alice)
    assert 'id="rules-status"' in client.get("/rules/").content.decode()

    disabled = client.post(f"/rules/{rule.pk}/enabled/", {"enabled": "0"}, headers=HTMX).content.decode()
    assert disabled.lstrip().startswith(f'<tr id="rule-{rule.pk}"')
    assert f"Rule #{rule.pk} disabled" in disabled and 'hx-swap-oob="innerHTML"' in disabled

    # Without JavaScript the page comes back saying it.
    page = client.post(f"/rules/{rule.pk}/enabled/", {"enabled": "1"}, follow=True).content.decode()
    assert f"Rule #{rule.pk} enabled: it decides matching calls again." in page

    deleted = client.post(f"/rules/{rule.pk}/delete/", follow=True).content.decode()
    assert f"Rule #{rule.pk} deleted" in deleted and f'id="rule-{rule.pk}"' not in deleted


def test_a_question_waiting_alone_is_answered_on_its_card_or_by_typing_and_a_plan_only_on_its_card(alice, agent):
    asked = start(alice, agent, "ask me to choose between tea, coffee and water")
    bar = status_bar(client_for(alice).get(f"/conversations/{asked.pk}/").content.decode())
    assert "Waiting for an answer." in bar and "type your answer below" in bar and "“yes”" not in bar

    planned = start(alice, agent, "plan a tidy-up of the notes")
    bar = status_bar(client_for(alice).get(f"/conversations/{planned.pk}/").content.decode())
    assert "Decide on the card." in bar and "type “" not in bar and "type your" not in bar
