"""The JSON API: shapes, auth, per-object access, CSRF and bad input."""
import json

import pytest
from django.test import Client

from approvals.models import Approval
from chat.models import Conversation, ToolCall
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)


def start(api, text="delete a.txt and b.txt"):
    response = api.post("conversations", {"agent": "demo", "message": text})
    assert response.status_code == 201, response.content
    return Conversation.objects.get(pk=response.json()["id"])


def test_create_conversation_returns_201_and_the_stored_conversation(alice, agent, api_as):
    response = api_as(alice).post("conversations", {"agent": "demo", "message": "write hi to a.txt"})

    assert response.status_code == 201
    body = response.json()
    conversation = Conversation.objects.get(pk=body["id"])
    assert conversation.owner == alice and body["agent"] == "demo"
    assert body["messages"][0]["role"] == "user" and body["messages"][0]["content"] == "write hi to a.txt"


def test_get_conversation_shows_messages_tool_calls_and_approvals(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api)

    body = api.get(f"conversations/{conversation.pk}").json()

    assert body["status"] == "waiting_for_approval"
    calls = body["messages"][1]["tool_calls"]
    assert [(c["name"], c["arguments"], c["status"]) for c in calls] == [
        ("delete_file", {"path": "a.txt"}, "pending_approval"),
        ("delete_file", {"path": "b.txt"}, "pending_approval"),
    ]
    approval = calls[0]["approval"]
    assert approval["status"] == "pending" and approval["risk"] == "high" and approval["decided_by"] is None


def test_decision_approves_and_a_second_decision_is_a_conflict(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    first = api.post(f"approvals/{approval.pk}/decision", {"decision": "approve"})
    second = api.post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "no"})

    assert first.status_code == 200 and first.json()["status"] == "approved"
    assert second.status_code == 409 and "already approved" in second.json()["detail"]
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "api")
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED


def test_reject_through_the_api_stores_the_reason(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    response = api.post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "wrong file"})

    assert response.status_code == 200 and response.json()["rejection_reason"] == "wrong file"
    conversation.refresh_from_db()
    assert conversation.status == "idle"
    assert "Rejected by alice: wrong file" in conversation.messages.last().content


def test_approve_all_with_ids_approves_exactly_those(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api)
    first, second = pending_approvals(conversation)

    response = api.post(f"conversations/{conversation.pk}/approve-all", {"ids": [first.pk]})

    assert response.status_code == 200 and response.json() == {"approved": [first.pk], "needs_confirmation": []}
    assert [a.pk for a in pending_approvals(conversation)] == [second.pk]


def test_approve_all_without_ids_decides_nothing_and_names_what_it_would_have_covered(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api)
    first, second = pending_approvals(conversation)

    for body in (None, {}):
        refused = api.post(f"conversations/{conversation.pk}/approve-all", body)
        assert refused.status_code == 409 and refused.json()["would_decide"] == [first.pk, second.pk]
        assert refused.json()["shown_hashes"] == {str(first.pk): first.shown_hash, str(second.pk): second.shown_hash}
    assert len(pending_approvals(conversation)) == 2  # nothing decided

    listed = refused.json()
    response = api.post(f"conversations/{conversation.pk}/approve-all", {"ids": listed["would_decide"], "shown_hashes": listed["shown_hashes"]})
    assert response.status_code == 200 and sorted(response.json()["approved"]) == [first.pk, second.pk]
    assert not pending_approvals(conversation)
    # Nothing pending: nothing to name, nothing decided.
    assert api.post(f"conversations/{conversation.pk}/approve-all").json() == {"approved": [], "needs_confirmation": []}


def test_post_message_returns_202_and_runs_the_loop(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api, "hello")

    response = api.post(f"conversations/{conversation.pk}/messages", {"content": "what is 2 + 2"})

    assert response.status_code == 202
    assert conversation.messages.last().content == "I did calculate 2 + 2: 2 + 2 = 4"


def test_approvals_list_shows_only_what_the_caller_may_see(alice, bob, mallory, agent, api_as):
    conversation = start(api_as(alice))

    mine = api_as(alice).get("approvals", status="pending").json()
    approver = api_as(bob).get("approvals", status="pending").json()
    other = api_as(mallory).get("approvals", status="pending").json()

    assert mine["count"] == 2 and approver["count"] == 2 and other == {"items": [], "count": 0}
    item = mine["items"][0]
    assert item["conversation_id"] == str(conversation.pk) and item["tool_call"]["name"] == "delete_file"
    assert api_as(alice).get("approvals", status="approved").json()["count"] == 0


def test_another_users_ids_are_not_found(alice, mallory, agent, api_as):
    conversation = start(api_as(alice))
    approval = pending_approvals(conversation)[0]
    api = api_as(mallory)

    responses = [
        api.get(f"conversations/{conversation.pk}"),
        api.post(f"conversations/{conversation.pk}/messages", {"content": "yes"}),
        api.post(f"conversations/{conversation.pk}/approve-all"),
        api.post(f"approvals/{approval.pk}/decision", {"decision": "approve"}),
    ]

    assert [r.status_code for r in responses] == [404, 404, 404, 404]
    assert all("detail" in r.json() for r in responses)
    assert len(pending_approvals(conversation)) == 2


def test_an_approver_decides_but_cannot_write_in_someone_elses_conversation(alice, bob, agent, api_as):
    conversation = start(api_as(alice))
    approval = pending_approvals(conversation)[0]

    decided = api_as(bob).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})
    written = api_as(bob).post(f"conversations/{conversation.pk}/messages", {"content": "hi"})

    assert decided.status_code == 200
    approval.refresh_from_db()
    assert approval.decided_by == bob
    assert written.status_code == 403


@pytest.mark.parametrize(
    "body,status,detail",
    [
        ({"agent": "nope", "message": "hi"}, 400, "Unknown agent 'nope'."),
        ({"agent": "demo", "message": "   "}, 400, "The message is empty."),
        ({"agent": "demo", "message": "x" * 20001}, 400, "The message is longer than 20000 characters."),
    ],
)
def test_bad_conversation_input_is_a_clear_400(alice, agent, api_as, body, status, detail):
    response = api_as(alice).post("conversations", body)
    assert (response.status_code, response.json()["detail"]) == (status, detail)
    assert not Conversation.objects.exists()


def test_bad_decision_value_is_a_422(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    response = api.post(f"approvals/{approval.pk}/decision", {"decision": "maybe"})

    assert response.status_code == 422 and response.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_no_credentials_is_401_and_a_bad_token_too(db):
    assert Client().get("/api/approvals").status_code == 401
    response = Client().get("/api/approvals", headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401


def test_a_token_records_its_last_use_to_the_minute_not_on_every_request(alice, api_as):
    from datetime import timedelta

    from chat.models import ApiToken

    api = api_as(alice)
    assert api.get("approvals").status_code == 200
    token = ApiToken.objects.get(user=alice)
    first_use = token.last_used_at
    assert first_use is not None
    assert api.get("approvals").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at == first_use  # no write within the minute

    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first_use - timedelta(minutes=2))
    assert api.get("approvals").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at > first_use


def test_session_auth_needs_a_csrf_token_for_posts(alice, agent):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    body = json.dumps({"agent": "demo", "message": "hello"})

    refused = client.post("/api/conversations", body, content_type="application/json")
    client.get("/admin/login/")  # any page that sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post("/api/conversations", body, content_type="application/json", headers={"X-CSRFToken": token})

    assert refused.status_code == 403
    assert accepted.status_code == 201
    assert Conversation.objects.count() == 1


def test_retry_of_a_conversation_that_did_not_fail_is_a_conflict(alice, agent, api_as):
    api = api_as(alice)
    conversation = start(api, "hello")
    assert api.post(f"conversations/{conversation.pk}/retry").status_code == 409


def test_openapi_schema_is_served(db):
    schema = Client().get("/api/openapi.json").json()
    assert "/api/approvals/{approval_id}/decision" in schema["paths"]


def test_a_message_with_a_nul_character_is_a_clear_400(alice, agent, api_as):
    response = api_as(alice).post("conversations", {"agent": "demo", "message": "hi\x00there"})
    assert (response.status_code, response.json()["detail"]) == (400, "The message contains a NUL character.")
    assert not Conversation.objects.exists()


def test_approve_all_posted_back_after_an_edit_leaves_the_edited_call_pending(alice, agent, api_as):
    """An outsider's replay: the versions a 409 named, posted back after one call was edited, approve
    only what is still as it was named (a stale version never approves the edit)."""
    api = api_as(alice)
    conversation = start(api)
    first, second = pending_approvals(conversation)
    named = api.post(f"conversations/{conversation.pk}/approve-all").json()
    # As an edit leaves it: another version (what a decider was shown before no longer is what runs).
    Approval.objects.filter(pk=second.pk).update(edited_arguments={"path": "other.txt"}, edited_arguments_hash="e" * 64)

    response = api.post(f"conversations/{conversation.pk}/approve-all", {"ids": named["would_decide"], "shown_hashes": named["shown_hashes"]})

    assert response.json()["approved"] == [first.pk]
    assert [a.pk for a in pending_approvals(conversation)] == [second.pk]
