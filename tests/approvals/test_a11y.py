"""What the pages tell a person who reads them in order, as a screen reader or the keyboard meets
them: "Approve all" after the cards it approves, the four-eyes owner told what they can do (not to
type "approve all N"), and the rules page saying what a change did."""
import pytest

from approvals.policy import rulemaking
from approvals.models import Rule
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
