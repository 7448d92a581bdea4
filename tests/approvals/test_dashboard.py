"""The approval dashboard and its history: approvers only, filters, bulk decisions, constant queries."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.models import Approval
from approvals.services import decide
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}




def make_pending(owner, agent, count: int, *, tool: str = "delete_file") -> None:
    """Many pending approvals fast: rows written directly, as the loop would leave them."""
    conversation = Conversation.objects.create(owner=owner, agent=agent, status="waiting_for_approval")
    message = Message.objects.create(conversation=conversation, position=1, role="assistant")
    calls = ToolCall.objects.bulk_create(
        ToolCall(message=message, position=i, call_id=f"c{i}", name=tool, arguments={"path": f"{i}.txt"}, status="pending_approval", is_gated=True)
        for i in range(count)
    )
    Approval.objects.bulk_create(
        Approval(tool_call=c, conversation=conversation, requested_by=owner, reason="r", risk="high", arguments_hash="h")
        for c in calls
    )


def test_the_dashboard_is_for_approvers_only(alice, mallory, bob):
    assert client_for(alice).get("/approvals/").status_code == 403
    assert client_for(mallory).get("/approvals/history/").status_code == 403
    assert client_for(bob).get("/approvals/").status_code == 200


def test_the_inbox_lists_the_most_urgent_first_and_oldest_first_on_request(alice, bob, agent):
    """Critical first, then the soonest expiry (none after every deadline), then the oldest."""
    never = pending_approvals(start(alice, agent, "write hi to a.txt"))[0]  # medium, the oldest
    soon = pending_approvals(start(alice, agent, "email x@example.com about y"))[0]
    critical = pending_approvals(start(alice, agent, "delete all files"))[0]
    later = pending_approvals(start(alice, agent, "delete c.txt"))[0]
    now = timezone.now()
    for approval, expires_at in ((never, None), (soon, now + timezone.timedelta(minutes=5)), (critical, now + timezone.timedelta(days=1)), (later, now + timezone.timedelta(hours=2))):
        Approval.objects.filter(pk=approval.pk).update(expires_at=expires_at)

    def listed(query: str = "") -> list[int]:
        page = client_for(bob).get(f"/approvals/{query}").content.decode()
        return [int(pk) for pk in __import__("re").findall(r'<article id="approval-row-(\d+)"', page)]

    assert listed() == [critical.pk, soon.pk, later.pk, never.pk]
    assert listed("?order=age") == [never.pk, soon.pk, critical.pk, later.pk]
    assert listed("?order=nonsense") == listed()
    page = client_for(bob).get("/approvals/?order=age").content.decode()
    assert 'name="order" value="age" checked' in page  # the choice is kept in the form


def test_a_row_says_what_approve_does_who_asked_why_and_when_it_expires(alice, bob, agent):
    approval = pending_approvals(start(alice, agent, "email x@example.com about y"))[0]
    expires_at = timezone.now() + timezone.timedelta(minutes=30)
    Approval.objects.filter(pk=approval.pk).update(expires_at=expires_at, reason="Mail leaves the company: a person reads it first.")

    page = client_for(bob).get("/approvals/").content.decode()
    row = page[page.index(f'<article id="approval-row-{approval.pk}"'):]
    row = row[:row.index('<div class="row-card">')]

    assert "Send an email to x@example.com" in row
    assert "requested by <strong>alice</strong>" in row
    assert '<span class="row-why" title="Why a person is asked">Mail leaves the company: a person reads it first.</span>' in row
    assert 'class="row-expiry" data-expires-at="' in row  # app.js counts down beside it
    assert "expires <time datetime=" in row and expires_at.strftime("%H:%M") + " UTC" in row


def test_the_dashboard_lists_every_pending_approval_oldest_first(alice, mallory, bob, agent):
    first = start(alice, agent, "delete a.txt")
    second = start(mallory, agent, "email x@example.com about y")

    page = client_for(bob).get("/approvals/").content.decode()

    assert "2 pending." in page
    assert page.index(f'id="approval-row-{pending_approvals(first)[0].pk}"') < page.index(
        f'id="approval-row-{pending_approvals(second)[0].pk}"'
    )
    assert f"/conversations/{first.pk}/#tool-call-" in page  # a link into the conversation at the card


@pytest.mark.parametrize(
    "query,expected_tools",
    [
        ("tool=send_email", ["send_email"]),
        ("requester=alice", ["delete_file"]),
        ("risk=medium", ["write_file"]),
        ("q=notes", ["delete_file"]),
        ("agent=ops", []),
        ("older_than=60", []),
    ],
)
def test_filters_narrow_the_list(alice, mallory, bob, agent, query, expected_tools):
    start(alice, agent, "delete notes.txt")
    start(mallory, agent, "email x@example.com about y")
    start(mallory, agent, "write hi to a.txt")

    fragment = client_for(bob).get(f"/approvals/?{query}", headers=HTMX).content.decode()

    shown = sorted(t for t in ("delete_file", "send_email", "write_file") if f'<code class="tool-name">{t}</code>' in fragment)
    assert shown == expected_tools


def test_bulk_decision_rejects_the_selected_with_one_reason(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")
    a, b, c = pending_approvals(conversation)

    response = client_for(bob).post(
        "/approvals/bulk/", {"approval_ids": [a.pk, b.pk], "decision": "reject", "reason": "freeze"}, headers=HTMX
    )

    assert response.status_code == 200 and "Rejected 2." in response.content.decode()
    decided = {x.pk: (x.status, x.rejection_reason, x.decided_via) for x in Approval.objects.all()}
    assert decided[a.pk] == decided[b.pk] == ("rejected", "freeze", "dashboard")
    assert decided[c.pk][0] == "pending"


def test_bulk_decision_says_what_happened_to_each_selected_row(alice, bob, carol, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")
    a, b, c = pending_approvals(conversation)
    decide(c.pk, user=carol, approve=False, via="dashboard", shown_hash="")  # another approver got there first

    response = client_for(bob).post(
        "/approvals/bulk/", {"approval_ids": [a.pk, b.pk, c.pk, 999999], "decision": "approve"}, headers=HTMX
    )

    text = response.content.decode()
    assert response.status_code == 200
    assert "Approved 2." in text and "1 had already been decided." in text and "1 no longer exists." in text


def test_bulk_decision_is_for_approvers_only(alice, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    response = client_for(alice).post("/approvals/bulk/", {"approval_ids": [approval.pk], "decision": "approve"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_an_approver_sees_no_controls_for_their_own_four_eyes_call(bob, ops_agent):
    start(bob, ops_agent, "delete a.txt")
    page = client_for(bob).get("/approvals/").content.decode()
    assert "Waiting for an approver." in page and ">Approve</button>" not in page


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_dashboard_and_history_queries_are_the_same_at_10_and_1000_approvals(alice, bob, agent):
    client = client_for(bob)
    make_pending(alice, agent, 10)
    Approval.objects.filter(pk__in=Approval.objects.values("pk")[:5]).update(status="approved", decided_at=timezone.now(), decided_by=bob, decided_via="api")
    small = (count_queries(client, "/approvals/"), count_queries(client, "/approvals/history/"))

    make_pending(alice, agent, 1000)
    Approval.objects.filter(pk__in=Approval.objects.filter(status="pending").values("pk")[:500]).update(
        status="rejected", decided_at=timezone.now(), decided_by=bob, decided_via="dashboard"
    )
    large = (count_queries(client, "/approvals/"), count_queries(client, "/approvals/history/"))

    assert small == large


def test_history_lists_decisions_with_who_when_via_and_why(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    client_for(bob).post(f"/approvals/dashboard/{approval.pk}/decide/", {"decision": "reject", "reason": "keep it"}, headers=HTMX)

    page = client_for(bob).get("/approvals/history/").content.decode()

    row = page[page.index(f'id="history-{approval.pk}"'):]
    row = row[: row.index("</tr>")]
    for text in ("Rejected", "delete_file", "alice", "bob", "dashboard", "keep it"):
        assert text in row


def test_a_bulk_approval_skips_critical_calls_and_says_so(alice, bob, agent):
    critical = start(alice, agent, "delete all files")
    [approval] = pending_approvals(critical)

    response = client_for(bob).post("/approvals/bulk/", {"approval_ids": [approval.pk], "decision": "approve"}, headers=HTMX)

    assert "Approved 0." in response.content.decode()
    assert "1 is critical: approve it on its row with its typed confirmation." in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_history_says_whom_a_delegate_decided_for_and_the_votes_that_approved(alice, agent):
    from datetime import timedelta

    from approvals.deciders import delegations
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    dana, erin, hank = member("dana", "finance"), member("erin", "finance"), member("hank")
    finance_route(agent)
    delegations.delegate(erin, to="hank", starts_at=timezone.now() - timedelta(minutes=1), ends_at=timezone.now() + timedelta(hours=1))
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    decide(approval.pk, user=dana, approve=True, via="dashboard", shown_hash=approval.shown_hash)
    decide(approval.pk, user=hank, approve=True, via="dashboard", shown_hash=approval.shown_hash)

    page = client_for(dana).get("/approvals/history/").content.decode()

    row = page[page.index(f'<tr id="history-{approval.pk}"'):]
    row = " ".join(row[:row.index("</tr>")].split())
    assert '<td data-label="By">hank for erin' in row and "2 of 2 approvals: dana, hank for erin" in row


def test_history_of_routed_decisions_reads_votes_in_a_constant_number_of_queries(alice, agent):
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    dana, erin = member("dana", "finance"), member("erin", "finance")
    finance_route(agent)

    def decided_all_and_count() -> int:
        for approval in Approval.objects.filter(status="pending"):
            for user in (dana, erin):
                decide(approval.pk, user=user, approve=True, via="dashboard", shown_hash=approval.shown_hash)
        return count_queries(client_for(dana), "/approvals/history/")

    start(alice, agent, "delete a.txt")
    few = decided_all_and_count()
    start(alice, agent, "delete a.txt, b.txt and c.txt")
    assert decided_all_and_count() == few
