"""Floods and garbage sent to the approval-requests API (issue 27): a flood is a 429 with Retry-After
that leaves nothing behind, a wrong type or a body that is not a request is a clear 4xx naming the
field and storing nothing, unknown fields are ignored, and no token or a wrong one is a 401."""
import pytest

from approvals.models import Approval
from chat.models import Conversation, ToolCall
from tests.security.outside_api import ask, asked, nothing_stored

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flood_is_a_429_with_retry_after_that_leaves_nothing_behind(alice, gated_deploy, api_as, settings):
    settings.HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR = 3  # requests' own quota (issue 36), not the chat's messages
    api = api_as(alice)

    statuses = [ask(api).status_code for _ in range(3)]
    refused = ask(api)
    in_a_thread = ask(api, thread="flood")

    assert statuses == [201, 201, 201]
    assert refused.status_code == in_a_thread.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert Conversation.objects.count() == ToolCall.objects.count() == 3  # no empty conversation left behind


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"thread": False}, "thread"),
        ({"thread": 0}, "thread"),
        ({"thread": []}, "thread"),
        ({"thread": {"a": 1}}, "thread"),
        ({"thread": "nul\u0000"}, "thread"),
        ({"tool": None}, "tool"),
        ({"tool": 3}, "tool"),
        ({"tool": ["deploy"]}, "tool"),
        ({"agent": None}, "agent"),
        ({"agent": ["demo"]}, "agent"),
        ({"arguments": None}, "arguments"),
        ({"reason": 1}, "reason"),
        ({"reason": {"a": 1}}, "reason"),
        ({"reason": "nul\u0000"}, "reason"),
        ({"risk": 2}, "risk"),
        ({"risk": "LOW"}, "risk"),
        ({"preview": []}, "preview"),
        ({"preview": {"kind": "text"}}, "preview.text"),
        ({"preview": {"kind": "text", "text": 5}}, "preview.text"),
        ({"preview": {"kind": "text", "text": "nul\u0000"}}, "preview.text"),
    ],
)
def test_a_wrong_type_is_a_400_naming_the_field_and_stores_nothing_even_in_a_thread(alice, gated_deploy, api_as, fields, field):
    response = ask(api_as(alice), **({"thread": "t-7"} | fields))

    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert nothing_stored()


@pytest.mark.parametrize(
    "raw",
    [
        "{",
        "[]",
        "null",
        '"text"',
        "7",
        '{"agent": "demo", "tool": "deploy", "arguments": {"a": "\\ud800"}}',
        '{"agent": "demo", "tool": "\\udfff", "arguments": {}}',
        '{"agent": "demo", "tool": "deploy", "arguments": {}, "thread": "\\ud83d"}',
        '{"agent": "demo", "tool": "deploy", "arguments": {"replicas": NaN}}',
        '{"agent": "demo", "tool": "deploy", "arguments": {"n": [Infinity, -Infinity]}}',
        "[" * 100_000 + "]" * 100_000,
    ],
)
def test_a_body_that_is_not_a_request_is_a_clear_4xx_and_stores_nothing(alice, gated_deploy, api_as, raw):
    response = api_as(alice).client.post("/api/approval-requests", raw, content_type="application/json", headers=api_as(alice).headers)

    assert 400 <= response.status_code < 500, response.content
    assert response["Content-Type"].startswith("application/json")
    assert nothing_stored()


def test_unknown_fields_are_ignored_and_cannot_set_what_the_server_decides(alice, gated_deploy, api_as):
    body = asked(api_as(alice), status="approved", decided_via="rule", route=1, owner="bob", conversation="x", id=1)

    assert body["status"] == "pending" and body["decided_via"] == "" and body["route"] is None


def test_no_token_or_a_wrong_one_is_a_401(gated_deploy, api_as, alice):
    body = asked(api_as(alice))
    anonymous = api_as(None)
    wrong = api_as(None)
    wrong.headers = {"Authorization": "Bearer not-a-token"}

    for api in (anonymous, wrong):
        assert ask(api).status_code == 401
        assert api.get(f"approvals/{body['id']}", wait=1).status_code == 401
        assert api.post(f"approvals/{body['id']}/outcome", {"status": "succeeded", "shown_hash": "x"}).status_code == 401
    assert Approval.objects.count() == 1
