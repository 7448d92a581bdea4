"""Finding 3: no more guessing passwords (django-axes locks a username on an address after a few
failures, on the site's and the admin's login) and per-user quotas on conversations, messages and
model calls: 429 with Retry-After and a JSON detail in the API, a clear message on the page."""
import pytest
from django.test import Client

from chat.models import Conversation
from tests.conftest import client_for, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("login_url", ["/accounts/login/", "/admin/login/"])
def test_the_right_password_after_many_wrong_ones_does_not_log_in(alice, settings, login_url):
    settings.AXES_FAILURE_LIMIT = 5
    if login_url.startswith("/admin"):
        alice.is_staff = True
        alice.save()
    client = Client()
    for _ in range(5):
        client.post(login_url, {"username": "alice", "password": "wrong"})

    response = client.post(login_url, {"username": "alice", "password": "alice-password"})

    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still sent to the login page


def test_the_lockout_is_per_username_and_address(alice, bob, settings):
    settings.AXES_FAILURE_LIMIT = 3
    attacker, colleague = Client(REMOTE_ADDR="203.0.113.9"), Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(3):
        attacker.post("/accounts/login/", {"username": "alice", "password": "wrong"})

    assert colleague.post("/accounts/login/", {"username": "alice", "password": "alice-password"}).status_code == 302
    assert attacker.post("/accounts/login/", {"username": "bob", "password": "bob-password"}).status_code == 302


def test_starting_more_conversations_than_the_quota_is_a_429_with_retry_after(alice, agent, api_as, settings):
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = 3
    api = api_as(alice)
    for i in range(3):
        assert api.post("conversations", {"agent": "demo", "message": f"what is {i} + 1"}).status_code == 201

    response = api.post("conversations", {"agent": "demo", "message": "what is 9 + 1"})
    page = client_for(alice).post("/conversations/new/", {"agent": "demo", "content": "what is 9 + 1"})

    assert response.status_code == 429 and 0 < int(response["Retry-After"]) <= 3600
    assert response.json()["detail"].startswith("You have reached the limit of 3 conversations an hour.")
    assert page.status_code == 429 and "Try again in 60 minutes" in page.content.decode()
    assert Conversation.objects.count() == 3


def test_messages_past_the_quota_are_refused_and_not_stored(alice, agent, api_as, settings):
    conversation = start(alice, agent, "what is 1 + 1")
    settings.HITL_QUOTA_MESSAGES_PER_MINUTE = 2
    api = api_as(alice)
    assert api.post(f"conversations/{conversation.pk}/messages", {"content": "what is 2 + 2"}).status_code == 202

    response = api.post(f"conversations/{conversation.pk}/messages", {"content": "what is 3 + 3"})
    page = client_for(alice).post(
        f"/conversations/{conversation.pk}/messages/", {"content": "what is 4 + 4"}, headers={"HX-Request": "true"}
    )

    assert response.status_code == 429 and 0 < int(response["Retry-After"]) <= 60
    assert page.status_code == 429 and "messages a minute" in page.content.decode()
    assert not conversation.messages.filter(content__in=["what is 3 + 3", "what is 4 + 4"]).exists()


def test_model_calls_past_the_quota_are_refused(alice, agent, api_as, settings):
    conversation = start(alice, agent, "what is 1 + 1")  # two model calls: the tool call, then the answer
    settings.HITL_QUOTA_MODEL_CALLS_PER_HOUR = 2

    response = api_as(alice).post(f"conversations/{conversation.pk}/messages", {"content": "what is 2 + 2"})

    assert response.status_code == 429 and "model calls an hour" in response.json()["detail"]


def test_outside_requests_have_a_quota_of_their_own_and_never_use_up_the_owners_chat(alice, agent, api_as, settings):
    """Issue 36: 256 approval requests used to count as 256 model calls, and the owner could not chat for 47 minutes."""
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = settings.HITL_QUOTA_MESSAGES_PER_MINUTE = settings.HITL_QUOTA_MODEL_CALLS_PER_HOUR = 3
    settings.HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR = 5
    api = api_as(alice)
    asked = [api.post("approval-requests", {"agent": agent.slug, "tool": "delete_file", "arguments": {"path": f"{i}.txt"}}) for i in range(5)]
    assert [r.status_code for r in asked] == [201] * 5  # past the chat's three conversations, messages and model calls

    refused = api.post("approval-requests", {"agent": agent.slug, "tool": "delete_file", "arguments": {"path": "x.txt"}})
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 3600
    assert refused.json()["detail"].startswith("You have reached the limit of 5 approval requests and gateway calls an hour.")

    # The owner's chat is untouched by what the agent asked.
    assert api.post("conversations", {"agent": "demo", "message": "what is 1 + 1"}).status_code == 201


def test_the_quota_page_is_a_page_that_says_how_long_to_wait_and_what_to_do(alice, agent, settings):
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = 1
    client = client_for(alice)
    client.post("/conversations/new/", {"agent": "demo", "content": "what is 1 + 1"})

    page = client.post("/conversations/new/", {"agent": "demo", "content": "what is 2 + 2"})

    text = page.content.decode()
    assert page.status_code == 429 and page["Content-Type"].startswith("text/html") and "<title>Slow down" in text
    minutes = -(-int(page["Retry-After"]) // 60)
    assert f"Wait {minutes} minutes" in text and "1 conversations an hour" in text and "Back to your conversations" in text
