"""Finding 13: how a decision was made (`decided_via`) comes from the route, never from the client."""
import pytest

from approvals.models import Approval
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}


def test_a_chat_card_decision_says_chat_whatever_the_form_claims(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    client_for(alice).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "via": "dashboard"}, headers=HTMX)

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", Approval.Via.CHAT)


def test_the_dashboards_decision_route_is_for_approvers_only(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)

    refused = client_for(alice).post(f"/approvals/dashboard/{first.pk}/decide/", {"decision": "approve"}, headers=HTMX)
    decided = client_for(bob).post(f"/approvals/dashboard/{second.pk}/decide/", {"decision": "approve"}, headers=HTMX)

    assert (refused.status_code, decided.status_code) == (403, 200)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "pending" and (second.decided_by, second.decided_via) == (bob, Approval.Via.DASHBOARD)


def test_a_stop_from_the_chat_page_says_chat_whatever_the_form_claims(alice, agent):
    conversation = start(alice, agent, "delete a.txt")

    client_for(alice).post(f"/conversations/{conversation.pk}/stop/", {"via": "dashboard"}, headers=HTMX)
    refused = client_for(alice).post(f"/conversations/{conversation.pk}/stop/dashboard/", headers=HTMX)

    assert refused.status_code == 403
    assert Approval.objects.get().decided_via == Approval.Via.CHAT
