"""The JSON API fuzzed from its own OpenAPI schema: schemathesis, in-process through Django's WSGI
app, as a token holder who owns real conversations with pending approvals. No input may give a 5xx,
documented responses must match the schema, and every 4xx must be JSON with a `detail` key."""
import json
import uuid

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings

from approvals.models import Approval
from approvals.services import decide
from chat import services
from chat.models import Agent, ApiToken, Conversation

pytestmark = pytest.mark.django_db(transaction=True)

app = get_wsgi_application()
# Loading the schema is one GET of /api/openapi.json through the WSGI app; it reads no rows.
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", app)

# Replaces some generated messages, so fuzzed posts also reach the loop's real paths.
PHRASES = ("delete a.txt and b.txt", "yes", "no, because not now", "yes but not b.txt", "write hi to c.txt", "hello")


def error_is_json_with_detail(ctx, response, case):
    """Every 4xx speaks the API's error shape: a JSON object with `detail`."""
    if 400 <= response.status_code < 500:
        content_type = response.headers.get("content-type", [""])[0]  # lower-case keys, lists of values
        assert content_type.startswith("application/json"), (
            f"{case.method} {case.formatted_path} answered {response.status_code} as {content_type!r}: {response.text[:200]!r}"
        )
        body = json.loads(response.text)
        assert isinstance(body, dict) and "detail" in body, f"{response.status_code} without detail: {response.text[:200]!r}"


CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.content_type_conformance,
    error_is_json_with_detail,
]


class World:
    """Real rows for the fuzzer to hit: alice's conversations (one waiting on two approvals, one
    decided, one failed so that retry has something to do) and bob's (which alice must not see),
    plus alice's bearer token."""

    def __init__(self, alice, bob, agent):
        waiting = services.start_conversation(user=alice, agent=agent, content="delete a.txt and b.txt")
        done = services.start_conversation(user=alice, agent=agent, content="write hi to c.txt")
        decide(Approval.objects.get(conversation=done).pk, user=alice, approve=True, via=Approval.Via.CHAT, shown_hash="")
        # litellm knows no provider "nowhere": the model call fails at once, offline, and is shown as failed.
        broken = Agent.objects.create(open_to_everyone=True, slug="broken", name="Broken", model="nowhere/model")
        failed = services.start_conversation(user=alice, agent=broken, content="hello")
        assert Conversation.objects.get(pk=failed.pk).status == Conversation.Status.FAILED
        others = services.start_conversation(user=bob, agent=agent, content="email x@example.com about y")
        self.conversations = [str(c.pk) for c in (waiting, done, failed, others)]
        self.approvals = list(Approval.objects.order_by("pk").values_list("pk", flat=True))
        self.token = ApiToken.issue(alice)

    def aim(self, case) -> None:
        """Point some generated ids and bodies at real rows and phrases. The choice is a function of
        the generated values, so Hypothesis replays and shrinks a failure to the same request."""
        parameters = case.path_parameters or {}
        conversation_id = parameters.get("conversation_id")
        if isinstance(conversation_id, str):
            try:
                n = uuid.UUID(conversation_id).int
            except ValueError:
                n = 0  # not a UUID: sent as generated
            if n % 5:
                parameters["conversation_id"] = self.conversations[n % 5 - 1]
        approval_id = parameters.get("approval_id")
        if type(approval_id) is int and approval_id % 5:
            parameters["approval_id"] = self.approvals[approval_id % 5 % len(self.approvals)]
        body = case.body
        if isinstance(body, dict):
            if isinstance(body.get("agent"), str) and len(body["agent"]) % 2 == 0:
                body["agent"] = "demo"
            for field in ("message", "content"):
                text = body.get(field)
                if isinstance(text, str) and text and ord(text[0]) % 2 == 0:
                    body[field] = PHRASES[ord(text[0]) % len(PHRASES)]
            ids = body.get("ids")
            if isinstance(ids, list):
                body["ids"] = [self.approvals[i % len(self.approvals)] if type(i) is int and i % 2 else i for i in ids]


@pytest.fixture
def world(alice, bob, agent):
    # web_fetch would reach the network once a fuzzed "fetch http://..." is approved: not offered here.
    agent.tools = [name for name in agent.tools if name != "web_fetch"]
    agent.save()
    return World(alice, bob, agent)


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_answers_every_request_without_a_server_error(case, world):
    world.aim(case)
    case.call_and_validate(headers={"Authorization": f"Bearer {world.token}"}, checks=CHECKS)


# --- What the fuzzer found ------------------------------------------------------------------------


@pytest.fixture
def api(alice):
    """Alice's bearer token on a client that returns a server error as a 500 instead of raising it."""
    client = Client(raise_request_exception=False)
    headers = {"Authorization": f"Bearer {ApiToken.issue(alice)}"}

    def call(method: str, path: str, body=None):
        data = json.dumps(body) if body is not None else ""
        return client.generic(method, f"/api/{path}", data, content_type="application/json", headers=headers)

    return call


def assert_client_error(response) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:200])
    assert response["Content-Type"].startswith("application/json") and "detail" in response.json()


def test_an_offset_past_64_bits_is_an_empty_page(api):
    response = api("GET", "approvals?offset=9223372036854775808")
    assert response.status_code == 200 and response.json()["items"] == []


def test_a_since_past_the_calendar_is_a_client_error(api):
    assert_client_error(api("GET", "approvals?since=9999-12-31T23:59:59-23:59"))


def test_an_approval_id_past_64_bits_is_a_client_error(api, agent):
    created = api("POST", "conversations", {"agent": "demo", "message": "delete a.txt and b.txt"})
    conversation = Conversation.objects.get(pk=created.json()["id"])

    response = api("POST", f"conversations/{conversation.pk}/approve-all", {"ids": [2**63]})

    assert_client_error(response)
    assert not Approval.objects.filter(conversation=conversation).exclude(status=Approval.Status.PENDING).exists()


def test_an_unsupported_method_gets_a_json_error(api):
    assert_client_error(api("DELETE", "approvals"))
