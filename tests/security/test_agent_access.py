"""Finding 4: agents are a security boundary. Only users (or groups) an agent is granted to may start
or continue a conversation with it; to anyone else it is unknown and not listed."""
import pytest
from django.contrib.auth.models import Group

from chat import services
from chat.models import Agent, Conversation
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def internal(db, settings, tmp_path):
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    return Agent.objects.create(
        slug="internal", name="Internal agent", tools=["web_fetch"], allow_private_fetch=True, model="scripted/internal"
    )


def test_an_agent_not_granted_to_you_is_unknown_in_the_api_and_on_the_page(mallory, internal, api_as):
    response = api_as(mallory).post("conversations", {"agent": "internal", "message": "fetch http://10.0.0.1/"})
    page = client_for(mallory).post("/conversations/new/", {"agent": "internal", "content": "hi"})

    assert (response.status_code, response.json()["detail"]) == (400, "Unknown agent 'internal'.")
    assert page.status_code == 404
    assert not Conversation.objects.exists()
    assert "Internal agent" not in client_for(mallory).get("/").content.decode()


def test_a_user_or_a_group_it_is_granted_to_may_use_it(alice, bob, internal, api_as):
    staff = Group.objects.create(name="staff")
    bob.groups.add(staff)
    internal.allowed_users.add(alice)
    internal.allowed_groups.add(staff)

    for user in (alice, bob):
        assert api_as(user).post("conversations", {"agent": "internal", "message": "hello"}).status_code == 201
    assert "Internal agent" in client_for(alice).get("/").content.decode()


def test_access_taken_away_stops_a_conversation_going_on(alice, internal, api_as):
    internal.allowed_users.add(alice)
    conversation = services.start_conversation(user=alice, agent=internal, content="hello")
    internal.allowed_users.remove(alice)

    response = api_as(alice).post(f"conversations/{conversation.pk}/messages", {"content": "more"})
    page = client_for(alice).post(f"/conversations/{conversation.pk}/messages/", {"content": "more"})

    assert (response.status_code, page.status_code) == (404, 404)
    assert conversation.messages.filter(content="more").count() == 0


def test_the_demo_agents_stay_open_to_every_user(mallory, agent, ops_agent, api_as):
    for slug in ("demo", "ops"):
        assert api_as(mallory).post("conversations", {"agent": slug, "message": "hello"}).status_code == 201
