"""What a start and a post cost daphne, counted: the statements of `POST /api/conversations` and of
`POST /api/conversations/<id>/messages` (issue 24). A change that adds one fails here; one that
saves one lowers the count. Transaction control (BEGIN, SAVEPOINT, COMMIT) differs between the
databases and inside a test's own transaction, so only the statements that read or write count."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Conversation

# The token's user, the agent, the conversation, its message, A2A's "a task open?" (agentlink.receivers).
START_STATEMENTS = 5
# The token's user, the conversation, its lock, "anything pending?", the next position, the message,
# A2A's "a task open?", the status set running, the status read for the answer.
POST_STATEMENTS = 9


def statements(captured: CaptureQueriesContext) -> list[str]:
    control = ("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK", "COMMIT")
    return [q["sql"] for q in captured.captured_queries if not q["sql"].upper().startswith(control)]


@pytest.fixture
def owner_api(alice, agent, api_as):
    api = api_as(alice)
    assert api.get("approvals").status_code == 200  # the token's first use is stamped once a minute: not counted
    return api


def test_a_start_costs_a_fixed_number_of_statements(owner_api, agent):
    with CaptureQueriesContext(connection) as captured:
        response = owner_api.post("conversations", {"agent": agent.slug, "message": "hello"})
    assert response.status_code == 201
    assert len(statements(captured)) == START_STATEMENTS, "\n".join(statements(captured))


def test_quotas_add_one_query_to_a_start_and_the_users_lock(owner_api, agent, settings):
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = settings.HITL_QUOTA_MESSAGES_PER_MINUTE = 30
    settings.HITL_QUOTA_MODEL_CALLS_PER_HOUR = 300
    lock = 1 if connection.features.has_select_for_update else 0  # SQLite's IMMEDIATE transaction is the lock
    with CaptureQueriesContext(connection) as captured:
        response = owner_api.post("conversations", {"agent": agent.slug, "message": "hello"})
    assert response.status_code == 201
    assert len(statements(captured)) == START_STATEMENTS + 1 + lock, "\n".join(statements(captured))


def test_a_post_costs_a_fixed_number_of_statements(owner_api, alice, make_conversation):
    conversation = make_conversation(alice, status=Conversation.Status.IDLE)
    with CaptureQueriesContext(connection) as captured:
        response = owner_api.post(f"conversations/{conversation.pk}/messages", {"content": "again"})
    assert response.status_code == 202
    assert len(statements(captured)) == POST_STATEMENTS, "\n".join(statements(captured))


def test_a_start_answers_the_conversation_as_stored(owner_api, agent):
    started = owner_api.post("conversations", {"agent": agent.slug, "message": "  hello there  "}).json()
    assert started == owner_api.get(f"conversations/{started['id']}").json()
    assert [m["content"] for m in started["messages"]] == ["hello there"]
