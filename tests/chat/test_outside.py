"""Approval requests from outside agents (chat.outside, POST /api/approval-requests): the agent's
policy, rules and routes decide as for its own calls; waiting; outcomes; bad input loses nothing."""
import threading
import time

import pytest
from django.utils import timezone

from approvals import audit
from approvals.models import Approval, Outcome, Rule
from chat.models import Conversation, ToolCall
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def ask(api, **fields):
    body = {"agent": "demo", "tool": "deploy", "arguments": {"service": "web", "version": "1.2"}} | fields
    return api.post("approval-requests", body)


def test_a_gated_request_waits_for_a_human_in_a_conversation_of_the_callers_thread(alice, gated_deploy, api_as):
    api = api_as(alice)

    response = ask(api, reason="Ship the fix", thread="ticket-42", preview={"kind": "text", "text": "web 1.1 → 1.2"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "pending" and body["reason"] == "Ship the fix"
    assert body["preview"] == {"kind": "text", "text": "web 1.1 → 1.2"}
    assert body["tool_call"]["name"] == "deploy" and body["arguments"] == {"service": "web", "version": "1.2"}
    conversation = Conversation.objects.get(pk=body["conversation"])
    assert (conversation.owner, conversation.source, conversation.external_thread, conversation.title) == (alice, "api", "ticket-42", "ticket-42")
    assert conversation.status == Conversation.Status.IDLE  # never advanced: no model runs in it
    again = ask(api, thread="ticket-42", arguments={"service": "db"}).json()
    assert again["conversation"] == body["conversation"]
    listed = api.get("approvals", status="pending", tool="deploy").json()
    assert sorted(item["id"] for item in listed["items"]) == sorted([body["id"], again["id"]])


def test_another_users_thread_of_the_same_name_is_never_joined(alice, mallory, gated_deploy, api_as):
    mine = ask(api_as(alice), thread="shared-name").json()
    theirs = ask(api_as(mallory), thread="shared-name").json()

    assert mine["conversation"] != theirs["conversation"]
    assert api_as(mallory).get(f"approvals/{mine['id']}").status_code == 404


def test_a_tool_the_agent_does_not_gate_is_approved_at_once_by_its_policy(alice, agent, api_as):
    body = ask(api_as(alice), tool="read_dashboard", arguments={}).json()

    assert (body["status"], body["decided_via"], body["decided_by"]) == ("approved", "policy", None)
    assert body["approved_arguments"] == {}
    assert audit.verify().is_intact


def test_an_allow_rule_answers_at_once_and_a_deny_rule_rejects(alice, gated_deploy, api_as):
    Rule.objects.create(effect="allow", tool="deploy", arguments={"service": "web"}, scope="agent_user", agent=gated_deploy, created_by=alice)
    Rule.objects.create(effect="deny", tool="deploy", arguments={"service": "db"}, scope="agent_user", agent=gated_deploy, created_by=alice)
    api = api_as(alice)

    allowed = ask(api).json()
    denied = ask(api, arguments={"service": "db"}).json()

    assert (allowed["status"], allowed["decided_via"]) == ("approved", "rule")
    assert (denied["status"], denied["decided_via"]) == ("rejected", "rule")
    assert "Denied by rule" in denied["rejection_reason"]


def test_a_high_risk_request_needs_four_eyes_and_a_declared_risk_never_lowers_the_tools(alice, bob, agent, api_as):
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.owner_max_risk = "medium"
    agent.save()
    api = api_as(alice)

    body = ask(api, risk="high").json()
    own = api.post(f"approvals/{body['id']}/decision", {"decision": "approve", "shown_hash": body["shown_hash"]})
    low = ask(api, tool="write_file", arguments={"path": "a.txt", "content": "hi"}, risk="low").json()  # the demo's own tool: medium

    assert body["risk"] == "high" and own.status_code == 403
    assert low["risk"] == "medium"
    decided = api_as(bob).post(f"approvals/{body['id']}/decision", {"decision": "approve", "shown_hash": body["shown_hash"]})
    assert decided.status_code == 200 and decided.json()["status"] == "approved"


def test_a_known_tool_is_checked_by_its_schema(alice, agent, api_as):
    response = ask(api_as(alice), tool="delete_file", arguments={"path": 3})

    assert response.status_code == 400 and response.json()["field"] == "arguments"


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"agent": "nope"}, "agent"),
        ({"agent": 7}, "agent"),
        ({"arguments": [1, 2]}, "arguments"),
        ({"arguments": "x"}, "arguments"),
        ({"tool": ""}, "tool"),
        ({"tool": "x" * 201}, "tool"),
        ({"risk": "extreme"}, "risk"),
        ({"preview": {"kind": "video", "text": "x"}}, "preview.kind"),
        ({"preview": {"kind": "text", "text": "x" * 20_001}}, "preview.text"),
        ({"preview": "x"}, "preview"),
        ({"reason": "x" * 2001}, "reason"),
        ({"thread": "t" * 201}, "thread"),
        ({"thread": 5}, "thread"),
        ({"arguments": {"a": "nul\u0000"}}, "arguments"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(alice, gated_deploy, api_as, fields, field):
    response = ask(api_as(alice), **fields)

    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not ToolCall.objects.exists() and not Approval.objects.exists()


def test_an_agent_the_caller_may_not_use_is_unknown(alice, agent, api_as):
    agent.open_to_everyone = False
    agent.save()

    response = ask(api_as(alice))

    assert response.status_code == 400 and response.json()["field"] == "agent"


def test_nobody_chats_in_an_outside_conversation(alice, gated_deploy, api_as):
    api = api_as(alice)
    body = ask(api).json()

    response = api.post(f"conversations/{body['conversation']}/messages", {"content": "hello"})

    assert response.status_code == 400
    assert Conversation.objects.get(pk=body["conversation"]).status == Conversation.Status.IDLE


def test_waiting_answers_as_soon_as_the_approval_is_decided(alice, bob, gated_deploy, api_as):
    body = ask(api_as(alice)).json()

    def decide_soon():
        time.sleep(0.5)
        api_as(bob).post(f"approvals/{body['id']}/decision", {"decision": "reject", "reason": "not today", "shown_hash": body["shown_hash"]})

    deciding = threading.Thread(target=decide_soon)
    started = time.monotonic()
    deciding.start()
    waited = api_as(alice).get(f"approvals/{body['id']}", wait=20)
    deciding.join()

    assert waited.status_code == 200
    assert (waited.json()["status"], waited.json()["rejection_reason"]) == ("rejected", "not today")
    assert time.monotonic() - started < 10


def test_waiting_on_a_pending_approval_answers_pending_after_the_wait(alice, gated_deploy, api_as):
    body = ask(api_as(alice)).json()

    waited = api_as(alice).get(f"approvals/{body['id']}", wait=1)

    assert waited.status_code == 200 and waited.json()["status"] == "pending"
    assert api_as(alice).get("approvals/999999", wait=1).status_code == 404


def test_the_outcome_is_reported_once_for_the_version_approved_and_kept_in_the_chain(alice, bob, gated_deploy, api_as):
    api = api_as(alice)
    body = ask(api).json()
    outcome = {"status": "succeeded", "result": "deployed 1.2", "shown_hash": body["shown_hash"]}
    assert api.post(f"approvals/{body['id']}/outcome", outcome).status_code == 409  # still pending
    edited = {"service": "web", "version": "1.3"}
    decided = api_as(bob).post(f"approvals/{body['id']}/decision", {"decision": "approve", "arguments": edited, "shown_hash": body["shown_hash"]}).json()
    assert decided["approved_arguments"] == edited and decided["outcome"] is None

    stale = api.post(f"approvals/{body['id']}/outcome", outcome)
    reported = api.post(f"approvals/{body['id']}/outcome", outcome | {"shown_hash": decided["shown_hash"]})
    twice = api.post(f"approvals/{body['id']}/outcome", outcome | {"shown_hash": decided["shown_hash"]})
    by_bob = api_as(bob).post(f"approvals/{body['id']}/outcome", outcome | {"shown_hash": decided["shown_hash"]})

    assert stale.status_code == 409
    assert reported.status_code == 200, reported.content
    assert reported.json()["outcome"] == {"status": "succeeded", "result": "deployed 1.2"}
    assert twice.status_code == 409 and by_bob.status_code == 403
    call = ToolCall.objects.get(approval__pk=body["id"])
    assert (call.status, call.result) == ("succeeded", "deployed 1.2")
    assert Outcome.objects.get().reported_by == alice
    assert audit.verify().is_intact


def test_a_rejected_call_has_no_outcome_and_a_loop_call_none_reported_from_outside(alice, bob, gated_deploy, api_as):
    api = api_as(alice)
    body = ask(api).json()
    api_as(bob).post(f"approvals/{body['id']}/decision", {"decision": "reject", "shown_hash": body["shown_hash"]})

    response = api.post(f"approvals/{body['id']}/outcome", {"status": "failed", "shown_hash": body["shown_hash"]})

    assert response.status_code == 409
    assert api.post(f"approvals/{body['id']}/outcome", {"status": "maybe", "shown_hash": body["shown_hash"]}).status_code == 400


def test_the_demos_outside_agent_asks_a_human_about_every_call(alice, api_as):
    from chat.demo import ensure_outside_agent

    ensure_outside_agent()

    body = ask(api_as(alice), agent="outside", tool="anything_at_all", arguments={"x": 1}).json()

    assert body["status"] == "pending" and "every tool call" in body["reason"]


def test_a_wrong_bearer_token_is_a_401_on_a_post_too_never_the_sessions_csrf_403(db, agent):
    from django.test import Client

    response = Client(enforce_csrf_checks=True).post(
        "/api/approval-requests", "{}", content_type="application/json", headers={"Authorization": "Bearer hitl_wrong"}
    )

    assert response.status_code == 401


def test_outside_requests_count_toward_their_own_quota_not_the_chats_conversations(alice, gated_deploy, api_as, settings):
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = 1  # the chat's: outside threads are not chat conversations
    settings.HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR = 3
    api = api_as(alice)
    statuses = [ask(api, thread=f"t{n}").status_code for n in range(3)]
    again = ask(api, thread="t0")

    assert statuses == [201, 201, 201]
    assert again.status_code == 429  # a fourth request, in a thread that exists: the requests' quota


def test_one_users_long_polls_past_the_cap_are_429_and_nobody_elses_are(alice, bob, gated_deploy, api_as, settings):
    from approvals.api import _waiting

    settings.HITL_LONG_POLLS_PER_USER = 2
    body = ask(api_as(alice)).json()
    answers = []
    waiting = [threading.Thread(target=lambda: answers.append(api_as(alice).get(f"approvals/{body['id']}", wait=20))) for _ in range(2)]
    for thread in waiting:
        thread.start()
    wait_until(lambda: _waiting[alice.pk] == 2, timeout=10, message="alice's two long polls to wait")

    extra = api_as(alice).get(f"approvals/{body['id']}", wait=5)
    assert extra.status_code == 429 and extra["Retry-After"] == "1" and "2 requests waiting" in extra.json()["detail"]
    assert api_as(alice).get(f"approvals/{body['id']}").status_code == 200  # a read that does not wait is never refused
    assert api_as(bob).get(f"approvals/{body['id']}", wait=1).status_code == 200  # another user's cap is their own

    api_as(bob).post(f"approvals/{body['id']}/decision", {"decision": "reject", "reason": "no", "shown_hash": body["shown_hash"]})
    for thread in waiting:
        thread.join(timeout=20)
    assert [a.json()["status"] for a in answers] == ["rejected", "rejected"]
    assert alice.pk not in _waiting  # each wait gave its place back


# --- issue 39, items 8 and 9: the caller's wait, and approvals by thread and by requester ---------


def test_the_caller_says_how_long_it_waits_and_the_agents_timeout_caps_it(alice, gated_deploy, api_as):
    api = api_as(alice)
    gated_deploy.approval_timeout_seconds = 3600
    gated_deploy.save()

    before = timezone.now()
    short = ask(api, expires_in=90).json()
    long = ask(api, expires_in=86_400).json()
    none = ask(api).json()

    def waits(body) -> float:
        return (Approval.objects.get(pk=body["id"]).expires_at - before).total_seconds()

    assert 89 <= waits(short) <= 95
    assert 3599 <= waits(long) <= 3605  # capped by the agent's hour
    assert 3599 <= waits(none) <= 3605
    gated_deploy.approval_timeout_seconds = None
    gated_deploy.save()
    assert 599 <= waits(ask(api, expires_in=600).json()) <= 605  # no timeout of its own: the caller's


@pytest.mark.parametrize("expires_in", [0, -5, 1.5, "60", True, 10**9])
def test_a_wait_that_is_not_a_whole_number_of_seconds_is_refused_and_nothing_is_asked(alice, gated_deploy, api_as, expires_in):
    response = ask(api_as(alice), expires_in=expires_in)

    assert response.status_code == 400
    assert response.json()["field"] == "expires_in" and "whole number of seconds" in response.json()["detail"]
    assert not Approval.objects.exists() and not Conversation.objects.exists()


def test_approvals_are_listed_by_outside_thread_and_by_requester_within_what_the_caller_sees(alice, mallory, bob, gated_deploy, api_as):
    ticket = ask(api_as(alice), thread="ticket-42").json()
    other_thread = ask(api_as(alice), thread="ticket-43").json()
    malloys = ask(api_as(mallory), thread="ticket-42").json()

    def ids(api, **params) -> list[int]:
        response = api.get("approvals", **params)
        assert response.status_code == 200, response.content
        return sorted(item["id"] for item in response.json()["items"])

    assert ids(api_as(alice), thread="ticket-42") == [ticket["id"]]  # mallory's thread of that name is not hers to see
    assert ids(api_as(bob), thread="ticket-42") == sorted([ticket["id"], malloys["id"]])  # an approver sees both
    assert ids(api_as(bob), requester="alice") == sorted([ticket["id"], other_thread["id"]])
    assert ids(api_as(bob), requester="mallory", thread="ticket-42") == [malloys["id"]]
    assert ids(api_as(alice), requester="mallory") == []
    assert api_as(bob).get("approvals", thread="a\x00b").status_code == 400
