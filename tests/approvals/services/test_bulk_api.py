"""Deciding many approvals at once: `POST /api/approvals/decisions` and decide_many() under it."""
import json

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals.models import Approval
from approvals.services import decide, decide_many
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation as start
from tests.approvals.services.test_races import race

URL = "/api/approvals/decisions"


def decisions(api, ids, decision="approve", reason=""):
    return api.post("approvals/decisions", {"ids": ids, "decision": decision, "reason": reason})


@pytest.mark.django_db(transaction=True)
def test_the_bulk_route_reports_each_id_in_one_list(alice, bob, agent, ops_agent, api_as):
    mine = start(alice, agent, "delete a.txt, b.txt and c.txt")
    first, second, third = pending_approvals(mine)
    [own_four_eyes] = pending_approvals(start(bob, ops_agent, "delete d.txt"))
    decide(second.pk, user=alice, approve=True, via="chat", shown_hash="")

    ids = [third.pk, first.pk, second.pk, own_four_eyes.pk, 999999, first.pk]
    response = decisions(api_as(bob), ids, "reject", "  freeze  ")

    assert response.status_code == 200, response.content
    body = response.json()
    # The owner may always say no, four-eyes calls included.
    assert [item["id"] for item in body["decided"]] == [first.pk, third.pk, own_four_eyes.pk]
    assert {(i["status"], i["decided_by"], i["decided_via"], i["rejection_reason"]) for i in body["decided"]} == {
        ("rejected", "bob", "api", "freeze")
    }
    assert body["decided"][0]["tool_call"]["name"] == "delete_file"
    assert body["decided"][0]["conversation_id"] == str(mine.pk)
    assert (body["already_decided"], body["not_allowed"], body["not_found"]) == ([second.pk], [], [999999])
    [other_four_eyes] = pending_approvals(start(bob, ops_agent, "delete e.txt"))
    assert decisions(api_as(bob), [other_four_eyes.pk]).json()["not_allowed"] == [other_four_eyes.pk]
    other_four_eyes.refresh_from_db()
    assert other_four_eyes.status == "pending"


@pytest.mark.django_db(transaction=True)
def test_another_users_approvals_are_not_found_for_a_non_approver(alice, mallory, agent, api_as):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    [own] = pending_approvals(start(mallory, agent, "delete b.txt"))

    body = decisions(api_as(mallory), [approval.pk, own.pk]).json()

    assert [item["id"] for item in body["decided"]] == [own.pk]
    assert (body["already_decided"], body["not_allowed"], body["not_found"]) == ([], [], [approval.pk])
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.django_db(transaction=True)
def test_approving_many_waiting_conversations_resumes_each_of_them(alice, bob, agent, api_as):
    conversations = [start(alice, agent, f"write hi to {name}.txt") for name in "abc"]
    ids = [a.pk for c in conversations for a in pending_approvals(c)]

    body = decisions(api_as(bob), ids).json()

    assert [item["id"] for item in body["decided"]] == sorted(ids)
    for conversation in conversations:
        conversation.refresh_from_db()
        assert conversation.status == Conversation.Status.IDLE
    assert set(ToolCall.objects.filter(approval__in=ids).values_list("status", flat=True)) == {"succeeded"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body,detail",
    [
        ({"ids": [], "decision": "approve"}, "Send between 1 and 1000 approval ids."),
        ({"ids": list(range(1, 1002)), "decision": "approve"}, "Send between 1 and 1000 approval ids."),
        ({"ids": [1], "decision": "reject", "reason": "x" * 2001}, "The reason is longer than 2000 characters."),
    ],
)
def test_bad_bulk_input_is_a_clear_400(alice, agent, api_as, body, detail):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    response = api_as(alice).post("approvals/decisions", body)
    assert (response.status_code, response.json()) == (400, {"detail": detail})
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body",
    [
        {"ids": [1], "decision": "maybe"},
        {"ids": [2**63], "decision": "approve"},  # past what the database holds
        {"ids": ["x"], "decision": "approve"},
        {"decision": "approve"},
    ],
)
def test_malformed_bulk_input_is_a_422(alice, api_as, body):
    response = api_as(alice).post("approvals/decisions", body)
    assert response.status_code == 422 and response.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_session_auth_needs_a_csrf_token_for_bulk_decisions(alice, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    client = client_for(alice, csrf=True)
    body = json.dumps({"ids": [approval.pk], "decision": "approve"})

    refused = client.post(URL, body, content_type="application/json")
    approval.refresh_from_db()
    assert refused.status_code == 403 and approval.status == "pending"

    client.get("/admin/login/")  # any page that sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(URL, body, content_type="application/json", headers={"X-CSRFToken": token})
    assert accepted.status_code == 200 and accepted.json()["decided"][0]["id"] == approval.pk


@pytest.mark.django_db(transaction=True)
def test_without_credentials_the_bulk_route_is_401(alice, agent):
    [approval] = pending_approvals(start(alice, agent, "delete a.txt"))
    response = Client().post(URL, json.dumps({"ids": [approval.pk], "decision": "approve"}), content_type="application/json")
    assert response.status_code == 401


@pytest.mark.django_db(transaction=True)
def test_the_bulk_route_is_in_the_openapi_schema():
    schema = Client().get("/api/openapi.json").json()
    assert "post" in schema["paths"]["/api/approvals/decisions"]


# --- decide_many ------------------------------------------------------------------------------------


def make_pending(owner, agent, count: int) -> list[int]:
    """Pending approvals written directly, as the loop would leave them; returns their ids."""
    conversation = Conversation.objects.create(owner=owner, agent=agent, status="waiting_for_approval")
    message = Message.objects.create(conversation=conversation, position=1, role="assistant")
    calls = ToolCall.objects.bulk_create(
        ToolCall(message=message, position=i, call_id=f"c{i}", name="delete_file", arguments={"path": f"{i}.txt"},
                 status="pending_approval", is_gated=True)
        for i in range(count)
    )
    Approval.objects.bulk_create(
        Approval(tool_call=c, conversation=conversation, requested_by=owner, reason="r", risk="high", arguments_hash="h")
        for c in calls
    )
    return list(Approval.objects.filter(conversation=conversation).order_by("pk").values_list("pk", flat=True))


@pytest.mark.django_db  # inside the test's transaction: nothing commits, so the receivers stay out of the count
def test_decide_many_queries_do_not_grow_with_the_number_of_ids(alice, bob, agent, django_capture_on_commit_callbacks):
    def decide_counted(ids):
        user = User.objects.get(pk=bob.pk)  # fresh, so each run loads the permissions once
        with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks() as callbacks:
            outcome = decide_many(dict.fromkeys(ids + [10**9], ""), user=user, approve=True, via="api")
        assert len(outcome.decided) == len(ids) and outcome.not_found == [10**9]
        assert len(callbacks) == 1  # one approvals_decided for all of them
        return len(queries)

    few, many = make_pending(alice, agent, 5), make_pending(alice, agent, 50)

    assert decide_counted(few) == decide_counted(many)
    assert set(Approval.objects.values_list("status", flat=True)) == {"approved"}


@pytest.mark.django_db(transaction=True)
def test_bulk_deciders_racing_single_decisions_decide_each_approval_once(alice, bob, carol, agent):
    conversation = start(alice, agent, "delete a.txt, b.txt and c.txt")
    approvals = pending_approvals(conversation)
    ids = [a.pk for a in approvals]

    results = race(
        lambda: decide_many(dict.fromkeys(ids, ""), user=bob, approve=True, via="api"),
        lambda: decide_many(dict.fromkeys(list(reversed(ids)), ""), user=carol, approve=False, via="api", reason="no"),
        lambda: decide(ids[-1], user=alice, approve=True, via="chat", shown_hash=""),
        lambda: decide_many(dict.fromkeys(ids, ""), user=alice, approve=True, via="dashboard"),
    )

    winners = [a.pk for r in results if hasattr(r, "decided") for a in r.decided]
    winners += [r.pk for r in results if isinstance(r, Approval)]
    assert sorted(winners) == sorted(ids), results
    for outcome in (r for r in results if hasattr(r, "decided")):
        assert sorted([a.pk for a in outcome.decided] + outcome.already_decided) == sorted(ids)
    stored = {a.pk: a for a in Approval.objects.filter(pk__in=ids)}
    calls = dict(ToolCall.objects.filter(approval__in=ids).values_list("approval", "status"))
    assert all(a.status in ("approved", "rejected") for a in stored.values())
    assert {pk: calls[pk] == "rejected" for pk in ids} == {pk: a.status == "rejected" for pk, a in stored.items()}


@pytest.mark.django_db(transaction=True)
def test_resuming_many_conversations_after_a_bulk_decision_takes_the_same_queries_as_one(alice, bob, agent, monkeypatch):
    """The receivers of one bulk decision (resume, dashboards, webhooks) work once for all of it;
    only the enqueue itself is per conversation."""
    from chat import tasks

    enqueued = []
    monkeypatch.setattr(tasks.advance_conversation, "delay", enqueued.append)

    def decide_counted(conversations: int) -> int:
        ids = [i for _ in range(conversations) for i in make_pending(alice, agent, 1)]
        user = User.objects.get(pk=bob.pk)
        with CaptureQueriesContext(connection) as queries:
            assert len(decide_many(dict.fromkeys(ids, ""), user=user, approve=True, via="api").decided) == conversations
        return len(queries)

    assert decide_counted(2) == decide_counted(20)
    assert len(enqueued) == 22
    assert Conversation.objects.filter(status="running").count() == 22
