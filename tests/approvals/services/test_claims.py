"""Claims (issue 25, item 5): "I'm on it" on a pending approval, a signal and not a lock, shown on
every inbox row and card, live; it ends with the decision or on unclaim."""
import re

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from approvals import services
from approvals.models import Approval
from approvals.services import AlreadyDecided, NotAllowed, claim, decide, unclaim
from core.live import APPROVALS_GROUP, conversation_group
from tests.conftest import client_for, pending_approvals, receive, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def test_a_claim_is_stored_with_who_and_when(alice, bob, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))

    returned = claim(approval.pk, user=bob)

    approval.refresh_from_db()
    assert approval.claimed_by == bob and approval.claimed_at is not None
    assert returned.claimed_by == bob and approval.status == Approval.Status.PENDING


def test_a_second_claim_replaces_the_first_a_signal_not_a_lock(alice, bob, carol, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    claim(approval.pk, user=bob)

    claim(approval.pk, user=carol)
    decide(approval.pk, user=bob, approve=False, via=Approval.Via.API, shown_hash="")  # bob still may decide

    approval.refresh_from_db()
    assert approval.status == Approval.Status.REJECTED and approval.decided_by == bob


def test_anyone_who_may_decide_may_unclaim(alice, bob, carol, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    claim(approval.pk, user=bob)

    unclaim(approval.pk, user=carol)

    approval.refresh_from_db()
    assert approval.claimed_by is None and approval.claimed_at is None


@pytest.mark.parametrize("decision", ["approve", "reject", "expire", "stop"])
def test_the_claim_ends_with_the_decision_in_the_deciding_update(alice, bob, agent, decision):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    claim(approval.pk, user=bob)

    if decision == "expire":
        Approval.objects.filter(pk=approval.pk).update(expires_at="2000-01-01T00:00:00Z")
        services.expire_overdue()
    elif decision == "stop":
        services.cancel_pending(conversation_id=approval.conversation_id, user=alice, via=Approval.Via.CHAT)
    else:
        decide(approval.pk, user=bob, approve=decision == "approve", via=Approval.Via.API, shown_hash="")

    approval.refresh_from_db()
    assert approval.status != Approval.Status.PENDING
    assert approval.claimed_by is None and approval.claimed_at is None


def test_a_bulk_decision_ends_the_claims_it_decides(alice, bob, agent):
    first, second = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))
    claim(first.pk, user=bob)
    claim(second.pk, user=bob)

    services.decide_many({first.pk: ""}, user=bob, approve=False, via=Approval.Via.DASHBOARD)

    first.refresh_from_db(), second.refresh_from_db()
    assert first.claimed_by is None and second.claimed_by == bob


def test_a_decided_approval_cannot_be_claimed(alice, bob, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    decide(approval.pk, user=bob, approve=False, via=Approval.Via.API, shown_hash="")

    with pytest.raises(AlreadyDecided):
        claim(approval.pk, user=bob)
    approval.refresh_from_db()
    assert approval.claimed_by is None


def test_who_may_not_decide_may_not_claim_and_who_may_not_see_is_not_told(alice, bob, mallory, ops_agent):
    [approval] = pending_approvals(start(alice, ops_agent, "delete a.txt"))  # four eyes: alice may only reject
    assert approval.approver_required

    with pytest.raises(NotAllowed):
        claim(approval.pk, user=alice)
    with pytest.raises(Approval.DoesNotExist):
        claim(approval.pk, user=mallory)
    approval.refresh_from_db()
    assert approval.claimed_by is None


# The API contract


def test_api_claim_and_unclaim_answer_with_claimed_by(alice, bob, agent, api_as):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    api = api_as(bob)

    claimed = api.post(f"approvals/{approval.pk}/claim")
    listed = api.get("approvals", status="pending").json()["items"]
    released = api.delete(f"approvals/{approval.pk}/claim")

    assert claimed.status_code == 200 and claimed.json()["claimed_by"] == "bob"
    assert [item["claimed_by"] for item in listed] == ["bob"]
    assert released.status_code == 200 and released.json()["claimed_by"] is None
    approval.refresh_from_db()
    assert approval.claimed_by is None


def test_api_claim_refuses_403_404_and_409(alice, bob, mallory, ops_agent, api_as):
    [approval] = pending_approvals(start(alice, ops_agent, "delete a.txt"))

    assert api_as(alice).post(f"approvals/{approval.pk}/claim").status_code == 403  # sees it, may not approve
    assert api_as(mallory).post(f"approvals/{approval.pk}/claim").status_code == 404
    assert api_as(mallory).delete(f"approvals/{approval.pk}/claim").status_code == 404
    assert api_as(bob).post("approvals/999999/claim").status_code == 404
    api_as(bob).post(f"approvals/{approval.pk}/decision", {"decision": "reject"})
    assert api_as(bob).post(f"approvals/{approval.pk}/claim").status_code == 409
    assert api_as(bob).delete(f"approvals/{approval.pk}/claim").status_code == 409
    approval.refresh_from_db()
    assert approval.claimed_by is None


def test_api_says_null_once_decided(alice, bob, agent, api_as):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    api = api_as(bob)
    api.post(f"approvals/{approval.pk}/claim")

    decided = api.post(f"approvals/{approval.pk}/decision", {"decision": "reject"})

    assert decided.json()["status"] == "rejected" and decided.json()["claimed_by"] is None
    assert api.get("approvals").json()["items"][0]["claimed_by"] is None


def test_api_claim_without_a_token_is_refused(alice, agent, api_as):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))

    assert api_as(None).post(f"approvals/{approval.pk}/claim").status_code == 401
    approval.refresh_from_db()
    assert approval.claimed_by is None


# Pages and pushes


def test_the_card_and_the_inbox_row_say_claimed_by_whom(alice, bob, carol, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    claim(approval.pk, user=bob)

    inbox = client_for(carol).get("/approvals/").content.decode()
    card = client_for(carol).get(f"/conversations/{conversation.pk}/").content.decode()

    row = inbox[inbox.index(f'id="approval-row-{approval.pk}"'):]
    assert "claimed by bob" in text_of(row[:row.index("</summary>")])  # without opening the row
    assert "claimed by bob" in text_of(card) and "Unclaim" in card


def test_the_page_buttons_claim_and_unclaim_with_csrf(alice, bob, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    client = client_for(bob, csrf=True)

    assert client.post(f"/approvals/dashboard/{approval.pk}/claim/", headers=HTMX).status_code == 403  # no token
    approval.refresh_from_db()
    assert approval.claimed_by is None

    client = client_for(bob)
    claimed = client.post(f"/approvals/dashboard/{approval.pk}/claim/", headers=HTMX)
    approval.refresh_from_db()
    assert claimed.status_code == 200 and approval.claimed_by == bob
    assert f'id="approval-{approval.pk}"' in claimed.content.decode() and "claimed by bob" in text_of(claimed.content.decode())

    released = client.post(f"/approvals/{approval.pk}/unclaim/", headers=HTMX)
    approval.refresh_from_db()
    assert released.status_code == 200 and approval.claimed_by is None and "Claim" in released.content.decode()


def test_the_page_routes_refuse_what_the_api_refuses(alice, bob, mallory, ops_agent):
    [approval] = pending_approvals(start(alice, ops_agent, "delete a.txt"))

    assert client_for(alice).post(f"/approvals/{approval.pk}/claim/", headers=HTMX).status_code == 403
    assert client_for(alice).post(f"/approvals/dashboard/{approval.pk}/claim/", headers=HTMX).status_code == 403
    assert client_for(mallory).post(f"/approvals/{approval.pk}/claim/", headers=HTMX).status_code == 404
    decide(approval.pk, user=bob, approve=False, via=Approval.Via.API, shown_hash="")
    late = client_for(bob).post(f"/approvals/{approval.pk}/claim/", headers=HTMX)
    assert late.status_code == 409 and "Rejected" in late.content.decode()
    approval.refresh_from_db()
    assert approval.claimed_by is None


def test_a_claim_is_pushed_to_the_inboxes_and_the_conversation(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    layer = get_channel_layer()
    inboxes, chat = async_to_sync(layer.new_channel)(), async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(APPROVALS_GROUP, inboxes)
    async_to_sync(layer.group_add)(conversation_group(conversation.pk), chat)

    client_for(bob).post(f"/approvals/{approval.pk}/claim/", headers=HTMX)

    signal = async_to_sync(receive)(layer, inboxes)["html"]
    line = async_to_sync(receive)(layer, chat)["html"]
    assert 'id="dashboard-signal"' in signal and 'data-event="approval.claimed"' in signal
    assert f'<div id="claim-{approval.pk}" class="claim-line is-claimed" hx-swap-oob="true">' in line
    assert "claimed by bob" in text_of(line)


def test_a_group_of_alike_calls_says_which_of_them_is_claimed(alice, bob, carol, agent):
    first, second = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    claim(second.pk, user=bob)

    inbox = client_for(carol).get("/approvals/").content.decode()

    group = inbox[inbox.index(f'id="approval-group-{first.pk}"'):]
    assert "notes/b.txt claimed by bob" in text_of(group[:group.index("</summary>")])


def test_the_requesters_own_card_offers_no_claim_an_approvers_does(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)

    owners = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    approvers = client_for(bob).get(f"/conversations/{conversation.pk}/").content.decode()

    assert f'<div id="claim-{approval.pk}" class="claim-line"></div>' in owners
    assert f'action="/approvals/{approval.pk}/claim/"' in approvers
