"""Finding 12: a conversation page and `GET /api/conversations/{id}` read every message. Both now
show the newest page and page back with `?before=<position>`, in queries that do not grow with the
conversation; a bad `limit` or `before` is a clear 4xx, never a 500."""
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import Approval
from chat.models import Message, ToolCall
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
BAD_BEFORE = ["0", "-1", "x", "1.5", "²", "9" * 30, "9" * 5000, "2147483648"]


def make_messages(conversation, count: int) -> None:
    """`count` messages written directly ("message <position>", user and assistant in turn); each
    tenth has a finished tool call and each twentieth a gated call waiting for an approval, so
    every page has the same shape whatever the conversation's length."""
    messages = Message.objects.bulk_create(
        Message(conversation=conversation, position=i, role="assistant" if i % 2 == 0 else "user", content=f"message {i}")
        for i in range(1, count + 1)
    )
    calls = ToolCall.objects.bulk_create(
        ToolCall(
            message=m, call_id=f"c{m.position}", name="write_file", arguments={"path": f"{m.position}.txt"},
            status="pending_approval" if m.position % 20 == 0 else "succeeded", is_gated=m.position % 20 == 0,
        )
        for m in messages
        if m.position % 10 == 0
    )
    Approval.objects.bulk_create(
        Approval(tool_call=c, conversation=conversation, requested_by=conversation.owner, reason="r", risk="medium", arguments_hash="h")
        for c in calls
        if c.is_gated
    )


def shown(html: str) -> list[int]:
    """The positions of the messages in `html`, in the order the page shows them."""
    return [int(part.split("<", 1)[0]) for part in html.split('<div class="message-content">message ')[1:]]


def count_queries(client, url: str, **headers) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url, headers=headers).status_code == 200
    return len(queries)


@pytest.fixture
def long_conversation(alice, make_conversation):
    conversation = make_conversation(alice, title="long")
    make_messages(conversation, 5000)
    return conversation


@pytest.fixture
def short_conversation(alice, make_conversation):
    """Long enough for a full newest page with the same shape as the long one's."""
    conversation = make_conversation(alice, title="short")
    make_messages(conversation, 60)
    return conversation


@pytest.fixture
def conversation(alice, make_conversation):
    conversation = make_conversation(alice)
    make_messages(conversation, 120)
    return conversation


# --- The page ----------------------------------------------------------------------------------


def test_the_page_of_5000_messages_shows_the_newest_50_in_constant_queries_and_quickly(
    alice, long_conversation, short_conversation, django_assert_num_queries
):
    client = client_for(alice)
    client.get(f"/conversations/{short_conversation.pk}/")  # the session's first read
    queries = count_queries(client, f"/conversations/{short_conversation.pk}/")

    with django_assert_num_queries(queries):
        started = time.monotonic()
        response = client.get(f"/conversations/{long_conversation.pk}/")
        elapsed = time.monotonic() - started

    page = response.content.decode()
    assert response.status_code == 200
    assert shown(page) == list(range(4951, 5001))
    assert f'href="/conversations/{long_conversation.pk}/?before=4951"' in page
    assert f'hx-get="/conversations/{long_conversation.pk}/?before=4951"' in page
    assert "Load earlier messages" in page
    assert elapsed < 2, f"{elapsed:.2f} s"


def test_load_earlier_returns_the_previous_page_with_its_own_control_first(alice, conversation):
    client = client_for(alice)

    first = client.get(f"/conversations/{conversation.pk}/?before=71", headers=HTMX).content.decode()
    last = client.get(f"/conversations/{conversation.pk}/?before=21", headers=HTMX).content.decode()

    # The fragment replaces the control at the top of #messages: it is prepended, in order.
    assert first.lstrip().startswith('<div id="earlier-messages"') and "<html" not in first
    assert 'id="messages"' not in first and 'id="conversation-status"' not in first
    assert f'hx-get="/conversations/{conversation.pk}/?before=21"' in first
    assert 'hx-target="#earlier-messages"' in first and 'hx-swap="outerHTML"' in first
    assert shown(first) == list(range(21, 71))
    assert shown(last) == list(range(1, 21))
    assert "Load earlier messages" not in last


def test_load_earlier_queries_do_not_grow_with_the_conversation(alice, long_conversation, short_conversation):
    client = client_for(alice)
    client.get(f"/conversations/{short_conversation.pk}/")

    small = count_queries(client, f"/conversations/{short_conversation.pk}/?before=41", **HTMX)
    with CaptureQueriesContext(connection) as queries:
        earlier = client.get(f"/conversations/{long_conversation.pk}/?before=4941", headers=HTMX).content.decode()

    assert small == len(queries)
    assert shown(earlier) == list(range(4891, 4941))


def test_without_javascript_the_link_opens_the_earlier_page_with_a_way_back(alice, conversation):
    page = client_for(alice).get(f"/conversations/{conversation.pk}/?before=71").content.decode()

    assert "<html" in page and shown(page) == list(range(21, 71))
    assert f'href="/conversations/{conversation.pk}/?before=21"' in page
    assert f'href="/conversations/{conversation.pk}/">Back to the newest messages' in page
    # A page of the past does not take pushes: they would append after a gap.
    assert "ws-connect" not in page


def test_the_refresh_after_a_reconnect_re_renders_the_newest_page(alice, conversation):
    fragment = client_for(alice).get(f"/conversations/{conversation.pk}/", headers=HTMX).content.decode()

    assert fragment.startswith('<div id="messages"') and 'id="conversation-status"' in fragment
    assert shown(fragment) == list(range(71, 121))
    assert f'hx-get="/conversations/{conversation.pk}/?before=71"' in fragment


def test_a_short_conversation_has_no_load_earlier_control(alice, make_conversation):
    conversation = make_conversation(alice)
    make_messages(conversation, 50)

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert shown(page) == list(range(1, 51))
    assert "Load earlier messages" not in page and "?before=" not in page


@pytest.mark.parametrize("before", BAD_BEFORE)
@pytest.mark.parametrize("headers", [{}, HTMX], ids=["page", "htmx"])
def test_a_bad_before_on_the_page_is_a_clear_400(alice, conversation, before, headers):
    response = client_for(alice).get(f"/conversations/{conversation.pk}/", {"before": before}, headers=headers)

    assert response.status_code == 400
    assert response.content.decode() == "“before” must be a message position: a whole number from 1 to 2147483647."


def test_another_users_earlier_messages_are_a_404(mallory, conversation):
    response = client_for(mallory).get(f"/conversations/{conversation.pk}/?before=71", headers=HTMX)
    assert response.status_code == 404


# --- The API -----------------------------------------------------------------------------------


def test_the_api_returns_the_newest_50_of_5000_oldest_first_in_constant_queries(
    alice, long_conversation, short_conversation, api_as, django_assert_num_queries
):
    api = api_as(alice)
    api.get(f"conversations/{short_conversation.pk}")  # a token's first use is recorded, a write
    with CaptureQueriesContext(connection) as queries:
        assert api.get(f"conversations/{short_conversation.pk}").status_code == 200

    with django_assert_num_queries(len(queries)):
        started = time.monotonic()
        response = api.get(f"conversations/{long_conversation.pk}")
        elapsed = time.monotonic() - started

    body = response.json()
    assert response.status_code == 200
    assert [m["position"] for m in body["messages"]] == list(range(4951, 5001))
    assert (body["has_earlier"], body["earliest_position"]) == (True, 4951)
    assert body["messages"][-1]["tool_calls"][0]["approval"]["status"] == "pending"
    assert elapsed < 2, f"{elapsed:.2f} s"


def test_the_api_pages_back_with_limit_and_before_to_the_first_message(alice, make_conversation, api_as):
    conversation = make_conversation(alice)
    make_messages(conversation, 450)
    api = api_as(alice)

    pages, before = [], None
    while True:
        body = api.get(f"conversations/{conversation.pk}", limit=200, **({"before": before} if before else {})).json()
        pages.append([m["position"] for m in body["messages"]])
        if not body["has_earlier"]:
            break
        before = body["earliest_position"]

    assert [(p[0], p[-1], len(p)) for p in pages] == [(251, 450, 200), (51, 250, 200), (1, 50, 50)]
    assert body["earliest_position"] == 1


def test_the_api_with_nothing_before_returns_no_messages_and_nothing_earlier(alice, make_conversation, api_as):
    conversation = make_conversation(alice)
    make_messages(conversation, 3)
    api = api_as(alice)

    whole = api.get(f"conversations/{conversation.pk}").json()
    none = api.get(f"conversations/{conversation.pk}", before=1).json()
    one = api.get(f"conversations/{conversation.pk}", limit=1).json()

    assert ([m["position"] for m in whole["messages"]], whole["has_earlier"], whole["earliest_position"]) == ([1, 2, 3], False, 1)
    assert (none["messages"], none["has_earlier"], none["earliest_position"]) == ([], False, None)
    assert ([m["position"] for m in one["messages"]], one["has_earlier"], one["earliest_position"]) == ([3], True, 3)


@pytest.mark.parametrize(
    "params",
    [{"limit": v} for v in ["0", "-1", "201", "x", "1.5", "²", "9" * 30, "9" * 5000]] + [{"before": v} for v in BAD_BEFORE],
    ids=lambda p: f"{next(iter(p))}={next(iter(p.values()))[:12]}",
)
def test_a_bad_limit_or_before_in_the_api_is_a_clear_422(alice, conversation, api_as, params):
    response = api_as(alice).get(f"conversations/{conversation.pk}", **params)

    assert response.status_code == 422 and response["Content-Type"].startswith("application/json")
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", next(iter(params))] and error["msg"]


def test_another_users_conversation_is_not_found_whatever_the_paging(mallory, conversation, api_as):
    response = api_as(mallory).get(f"conversations/{conversation.pk}", limit=10, before=50)
    assert (response.status_code, response.json()) == (404, {"detail": "No such conversation."})


def test_the_schema_documents_the_default_and_maximum_limit(client):
    operation = client.get("/api/openapi.json").json()["paths"]["/api/conversations/{conversation_id}"]["get"]

    parameters = {p["name"]: p["schema"] for p in operation["parameters"]}
    assert (parameters["limit"]["default"], parameters["limit"]["maximum"], parameters["limit"]["minimum"]) == (50, 200, 1)
    assert {"type": "integer", "minimum": 1, "maximum": 2**31 - 1} in parameters["before"]["anyOf"]
    assert "default 50" in operation["description"] and "at most 200" in operation["description"]
    assert "has_earlier" in operation["description"] and "before" in operation["description"]


# SQLite's plan, read as text (as in tests/approvals/test_pages_speed.py): the newest page comes from the
# (conversation, position) unique index read backwards, not from sorting the whole conversation.
if connection.vendor == "sqlite":

    def test_the_newest_page_comes_from_the_position_index_not_a_sort(alice, long_conversation):
        with CaptureQueriesContext(connection) as queries:
            client_for(alice).get(f"/conversations/{long_conversation.pk}/?before=4000", headers=HTMX)
        [sql] = [q["sql"] for q in queries if 'FROM "chat_message"' in q["sql"]]

        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
            plan = " ".join(str(row) for row in cursor.fetchall())

        assert "conversation_id=? AND position<?" in plan and "TEMP B-TREE" not in plan, plan
