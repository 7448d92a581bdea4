"""What keeps the busy pages fast at 100,000 approvals (timed by bench/run.py, not here): few
dashboard rows, query counts that do not grow with rows, and list orderings that an index gives."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.api import visible_approvals
from approvals.models import Approval
from approvals.selectors import Filters, pending_approvals
from approvals.views import DASHBOARD_ROWS
from chat.models import Conversation, Message, ToolCall
from chat.selectors import recent_conversations
from tests.conftest import ApiClient, client_for

pytestmark = pytest.mark.django_db


def make_approvals(owner, agent, conversations: int, *, per_conversation: int = 2, decided_by=None) -> None:
    """Rows written directly: `conversations` conversations with `per_conversation` approvals each,
    decided by `decided_by` or else pending."""
    made = Conversation.objects.bulk_create(Conversation(owner=owner, agent=agent) for _ in range(conversations))
    messages = Message.objects.bulk_create(Message(conversation=c, position=1, role="assistant") for c in made)
    calls = ToolCall.objects.bulk_create(
        ToolCall(message=m, position=i, call_id=f"c{i}", name="write_file", arguments={"path": f"{i}.txt"},
                 status="succeeded" if decided_by else "pending_approval", is_gated=True)
        for m in messages
        for i in range(per_conversation)
    )
    decision = {"status": "approved", "decided_at": timezone.now(), "decided_by": decided_by, "decided_via": "api"}
    Approval.objects.bulk_create(
        Approval(tool_call=c, conversation_id=c.message.conversation_id, requested_by=owner, reason="r", risk="medium",
                 arguments_hash="h", **(decision if decided_by else {}))
        for c in calls
    )


def count_queries(client, url: str, **headers) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, headers=headers).status_code == 200
    return len(queries)


def test_the_dashboard_shows_the_oldest_rows_and_says_how_many_wait(alice, bob, agent):
    make_approvals(alice, agent, 40)

    page = client_for(bob).get("/approvals/").content.decode()

    assert page.count('class="approval-row ') == DASHBOARD_ROWS == 50
    assert "80 pending; showing the most urgent 50 of 80." in page
    first = Approval.objects.order_by("requested_at", "pk").first()
    assert f'id="approval-row-{first.pk}"' in page


def test_api_list_and_conversation_list_queries_do_not_grow_with_rows(alice, bob, agent):
    pages = [("/", client_for(alice), {})]
    for user in (alice, bob):
        api = ApiClient(user)
        pages.append(("/api/approvals", api.client, api.headers))
        pages.append(("/api/approvals?status=pending", api.client, api.headers))
    make_approvals(alice, agent, 3)
    make_approvals(alice, agent, 3, decided_by=bob)
    for url, client, headers in pages:  # a token's first use is recorded (once a minute), a write
        client.get(url, headers=headers)
    small = [count_queries(client, url, **headers) for url, client, headers in pages]

    make_approvals(alice, agent, 150)
    make_approvals(alice, agent, 300, decided_by=bob)
    large = [count_queries(client, url, **headers) for url, client, headers in pages]

    assert small == large


# SQLite's plans, read as text. (On PostgreSQL the planner sorts tables this small whatever the
# indexes, so there the query-count tests above are what runs; the test is not collected.)
if connection.vendor == "sqlite":

    @pytest.mark.parametrize("analyzed", [False, True], ids=["no statistics", "analyzed"])
    @pytest.mark.parametrize(
        "queryset,index",
        [
            (lambda alice, bob: pending_approvals(Filters(order="age"), user=bob)[:DASHBOARD_ROWS], "approvals_pending_by_age (status=?)"),
            (lambda alice, bob: visible_approvals(bob).order_by("requested_at", "pk")[:100], "approvals_requested_order"),
            (
                lambda alice, bob: visible_approvals(alice).order_by("requested_at", "pk")[:100],
                "approvals_requester_order (requested_by_id=?)",
            ),
            (lambda alice, bob: recent_conversations(alice), "chat_conv_owner_created (owner_id=?)"),
        ],
        ids=["dashboard by age", "approver's approvals (all)", "owner's approvals (their own)", "conversation list"],
    )
    def test_list_orderings_come_from_an_index_not_a_sort(alice, bob, agent, queryset, index, analyzed):
        make_approvals(alice, agent, 100, decided_by=bob)
        make_approvals(alice, agent, 5)
        if analyzed:  # statistics change SQLite's choice of index; production may or may not have them
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        plan = queryset(alice, bob).explain()

        assert f"USING INDEX {index}" in plan and "TEMP B-TREE" not in plan, plan

    @pytest.mark.parametrize("analyzed", [False, True], ids=["no statistics", "analyzed"])
    def test_the_inbox_sorts_by_urgency_only_what_waits(alice, bob, agent, analyzed):
        """Urgency (critical, then the soonest expiry, then age) is sorted, not read from an index: of
        the pending rows only, found through a pending-only index, never a scan of every decision."""
        make_approvals(alice, agent, 100, decided_by=bob)
        make_approvals(alice, agent, 5)
        if analyzed:
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

        plan = pending_approvals(Filters(), user=bob)[:DASHBOARD_ROWS].explain()

        assert "SEARCH approvals_approval USING INDEX approvals_pending_by_" in plan, plan
        assert "SCAN approvals_approval" not in plan, plan
