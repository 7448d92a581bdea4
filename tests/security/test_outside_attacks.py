"""The approval-requests API (issue 27) attacked as an outsider would: another user's threads and
approvals, policy dodged by tool names or a declared risk, a requester approving its own call,
outcomes reported twice or for another version, long polls that never end or pile up, floods and
garbage. Each refusal is a clear 4xx that stores nothing."""
import json
import threading
import time

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.db import connection
from django.utils import timezone

from approvals import audit
from approvals.models import Approval, Outcome, Route, Rule
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gated_deploy(agent):
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.save()
    return agent


def ask(api, **fields):
    body = {"agent": "demo", "tool": "deploy", "arguments": {"service": "web", "version": "1.2"}} | fields
    return api.post("approval-requests", body)


def asked(api, **fields) -> dict:
    response = ask(api, **fields)
    assert response.status_code == 201, response.content
    return response.json()


def decide(api, body: dict, decision: str = "approve", **fields):
    return api.post(f"approvals/{body['id']}/decision", {"decision": decision, "shown_hash": body["shown_hash"]} | fields)


def nothing_stored() -> bool:
    return not (Conversation.objects.exists() or ToolCall.objects.exists() or Approval.objects.exists())


# Another user's threads and approvals ---------------------------------------------------------------


@pytest.mark.parametrize("thread", ["shared", " shared ", "shared\t"])
def test_another_users_thread_is_never_joined_however_it_is_spelled(alice, mallory, gated_deploy, api_as, thread):
    mine = asked(api_as(alice), thread="shared")

    theirs = asked(api_as(mallory), thread=thread)

    assert theirs["conversation"] != mine["conversation"]
    assert Conversation.objects.get(pk=mine["conversation"]).messages.count() == 1
    assert Conversation.objects.get(pk=theirs["conversation"]).owner == mallory


def test_another_users_approval_reads_as_one_that_does_not_exist_even_while_waiting(alice, mallory, gated_deploy, api_as):
    body = asked(api_as(alice))
    api = api_as(mallory)

    started = time.monotonic()
    theirs = api.get(f"approvals/{body['id']}", wait=3)
    missing = api.get(f"approvals/{body['id'] + 1000}", wait=3)

    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    assert time.monotonic() - started < 2  # no wait on either: the wait never says which one exists


@pytest.mark.parametrize(
    "payload",
    [
        {"status": "succeeded", "shown_hash": "x"},
        {"status": "nonsense", "shown_hash": "x"},
        {"status": "failed", "result": "\u0000", "shown_hash": "x"},
    ],
)
def test_reporting_on_another_users_approval_reads_as_one_that_does_not_exist(alice, bob, mallory, gated_deploy, api_as, payload):
    body = asked(api_as(alice))
    decide(api_as(bob), body)
    api = api_as(mallory)

    theirs = api.post(f"approvals/{body['id']}/outcome", payload)
    missing = api.post(f"approvals/{body['id'] + 1000}/outcome", payload)

    assert (theirs.status_code, theirs.json()) == (missing.status_code, missing.json())
    assert theirs.status_code in (400, 404)
    assert not Outcome.objects.exists()


def test_an_approver_who_decided_it_may_not_report_its_outcome(alice, bob, gated_deploy, api_as):
    body = asked(api_as(alice))
    approved = decide(api_as(bob), body).json()

    response = api_as(bob).post(f"approvals/{body['id']}/outcome", {"status": "succeeded", "shown_hash": approved["shown_hash"]})

    assert response.status_code == 403
    assert not Outcome.objects.exists() and ToolCall.objects.get().status == ToolCall.Status.APPROVED


@pytest.fixture
def deploy_route(gated_deploy, carol):
    group = Group.objects.create(name="release")
    route = Route.objects.create(agent=gated_deploy, tool="deploy")
    route.approvers.add(group)
    carol.groups.add(group)
    return route


def test_a_routed_request_is_seen_by_its_requester_and_its_route_not_by_others(alice, mallory, member, deploy_route, api_as):
    body = asked(api_as(alice))

    assert body["route"] == deploy_route.pk
    assert api_as(alice).get(f"approvals/{body['id']}").status_code == 200
    assert api_as(member).get(f"approvals/{body['id']}", wait=1).status_code == 200
    assert api_as(mallory).get(f"approvals/{body['id']}", wait=1).status_code == 404
    assert decide(api_as(alice), body).status_code == 403  # its requester may not approve its own routed call
    assert api_as(member).post(f"approvals/{body['id']}/outcome", {"status": "succeeded", "shown_hash": body["shown_hash"]}).status_code == 403
    assert decide(api_as(member), body).json()["status"] == "approved"


def test_a_routed_request_cannot_dodge_its_route_by_declaring_a_low_risk(alice, deploy_route, api_as):
    body = asked(api_as(alice), risk="low")

    assert body["route"] == deploy_route.pk and decide(api_as(alice), body).status_code == 403


# Policy dodged by a tool's name or a declared risk ----------------------------------------------------


@pytest.mark.parametrize("tool", ["ask_human", "propose_plan"])
def test_a_tool_that_asks_a_human_is_never_requested_from_outside(alice, agent, api_as, tool):
    response = ask(api_as(alice), tool=tool, arguments={"question": "ok?"})

    assert response.status_code == 400 and response.json()["field"] == "tool", response.content
    assert nothing_stored()


def test_an_agents_own_tool_keeps_its_schema_its_risk_and_its_four_eyes(alice, bob, ops_agent, api_as):
    api = api_as(alice)

    bad = ask(api, agent="ops", tool="delete_file", arguments={"path": "../../etc/passwd", "extra": 1})
    body = asked(api, agent="ops", tool="delete_file", arguments={"path": "a.txt"}, risk="low")

    assert bad.status_code == 400 and bad.json()["field"] == "arguments"
    assert body["risk"] == "high" and body["status"] == "pending"
    assert decide(api, body, confirmation="a.txt").status_code == 403  # four eyes: not its requester
    assert decide(api_as(bob), body, confirmation="a.txt").json()["status"] == "approved"


def test_a_critical_tool_needs_its_confirmation_whatever_the_request_says(alice, agent, api_as):
    body = asked(api_as(alice), tool="delete_all_files", arguments={}, risk="low")

    assert body["risk"] == "critical" and body["confirmation_required"]
    assert decide(api_as(alice), body).status_code == 400
    assert Approval.objects.get(pk=body["id"]).status == Approval.Status.PENDING


@pytest.mark.parametrize(
    "tool",
    [
        "*",
        "deploy*",
        "dep[l]oy",
        "deploy?",
        "deploy\u200b",
        "\u202edeploy",
        "d\u0435ploy",  # a Cyrillic "е": looks like the agent's own tool
        "delete_file ",
        "<b>deploy</b>",
        "x" * 201,
        "deploy\u0000",
    ],
)
def test_a_tool_name_that_is_a_glob_or_hides_what_it_is_is_refused(alice, gated_deploy, api_as, tool):
    response = ask(api_as(alice), tool=tool)

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "tool"
    assert nothing_stored()


@pytest.mark.parametrize("tool", ["deploy", "git__git_commit", "github.create-issue", "Stripe/Refund:v2", "x" * 200])
def test_the_tool_names_agents_use_are_taken(alice, gated_deploy, api_as, tool):
    assert ask(api_as(alice), tool=tool).status_code == 201


def test_a_remembered_rule_of_an_outside_call_allows_that_tool_only(alice, bob, agent, api_as):
    from chat.demo import ensure_outside_agent

    ensure_outside_agent()
    body = asked(api_as(alice), agent="outside", tool="deploy", arguments={})
    remember = {"scope": "agent", "arguments": {}}

    decided = decide(api_as(bob), body, remember=remember)
    other = asked(api_as(alice), agent="outside", tool="drop_database", arguments={})

    assert decided.status_code == 200 and Rule.objects.get().tool == "deploy"
    assert other["status"] == "pending"


def test_an_allow_rule_never_approves_a_call_declared_critical_or_one_needing_four_eyes(alice, gated_deploy, api_as):
    gated_deploy.owner_max_risk = "medium"
    gated_deploy.max_auto_approve_risk = "critical"
    gated_deploy.save()
    Rule.objects.create(effect="allow", tool="*", arguments={}, scope="agent_user", agent=gated_deploy, created_by=alice)
    api = api_as(alice)

    low = asked(api, risk="low")
    high = asked(api, risk="high")
    critical = asked(api, risk="critical")

    assert (low["status"], low["decided_via"]) == ("approved", "rule")
    assert high["status"] == critical["status"] == "pending"
    assert critical["confirmation_required"]
    assert decide(api, high).status_code == 403  # four eyes: its requester may not approve it


def test_a_deny_rule_rejects_however_risky_the_request_says_it_is(alice, gated_deploy, api_as):
    Rule.objects.create(effect="deny", tool="deploy", arguments={}, scope="agent_user", agent=gated_deploy, created_by=alice)

    body = asked(api_as(alice), risk="critical")

    assert (body["status"], body["decided_via"]) == ("rejected", "rule")


def test_a_call_just_rejected_in_a_thread_is_rejected_again_at_once(alice, gated_deploy, api_as):
    api = api_as(alice)
    first = asked(api, thread="t-1")
    decide(api, first, "reject", reason="not on a Friday")

    again = asked(api, thread="t-1")

    assert (again["status"], again["decided_via"], again["rejection_reason"]) == ("rejected", "repeat", "not on a Friday")


def test_what_the_caller_previews_is_shown_escaped_and_invisible_characters_spelled_out(alice, gated_deploy, api_as):
    body = asked(api_as(alice), preview={"kind": "diff", "text": '<script>alert(1)</script>\u202e"gpj.exe'}, reason="<img src=x onerror=alert(2)>")

    page = client_for(alice).get(f"/conversations/{body['conversation']}/").content.decode()

    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "U+202E" in body["preview"]["text"] and "U+202E" in page


def test_the_callers_reason_never_hides_our_warning_of_invisible_characters_in_the_arguments(alice, gated_deploy, api_as):
    body = asked(api_as(alice), arguments={"to": "ceo@evil\u202ecom"}, reason="Routine, nothing to see")

    assert body["reason"].startswith("Routine, nothing to see") and "invisible or direction-changing" in body["reason"]
    assert body["risk"] == "high"


def test_a_preview_at_the_limit_is_taken_and_one_past_it_refused(alice, gated_deploy, api_as):
    api = api_as(alice)

    assert ask(api, preview={"kind": "text", "text": "x" * 20_000}).status_code == 201
    past = ask(api, preview={"kind": "text", "text": "x" * 20_001})

    assert past.status_code == 400 and past.json()["field"] == "preview.text"
    assert ToolCall.objects.count() == 1


# A requester approving its own call; decisions and outcomes on another version -------------------------


def test_a_decision_on_a_version_edited_since_is_refused(alice, bob, carol, gated_deploy, api_as):
    gated_deploy.owner_max_risk = "low"
    gated_deploy.save()
    body = asked(api_as(alice))
    edited = api_as(bob).post(
        f"approvals/{body['id']}/decision",
        {"decision": "approve", "arguments": {"service": "db", "version": "9"}, "shown_hash": body["shown_hash"]},
    ).json()
    assert edited["status"] == "pending" and edited["shown_hash"] != body["shown_hash"]  # four eyes: bob wrote it

    stale = decide(api_as(carol), body)
    current = decide(api_as(carol), edited)

    assert stale.status_code == 409
    assert current.json()["approved_arguments"] == {"service": "db", "version": "9"}


def test_the_requester_cannot_approve_its_own_four_eyes_request_in_bulk_either(alice, gated_deploy, api_as):
    gated_deploy.owner_max_risk = "medium"
    gated_deploy.save()
    api = api_as(alice)
    body = asked(api, risk="high")

    response = api.post("approvals/decisions", {"decision": "approve", "ids": [body["id"]], "shown_hashes": {str(body["id"]): body["shown_hash"]}})

    assert response.json()["not_allowed"] == [body["id"]]
    assert Approval.objects.get(pk=body["id"]).status == Approval.Status.PENDING


def test_a_call_approved_by_policy_has_its_outcome_reported_once(alice, agent, api_as):
    api = api_as(alice)
    body = asked(api, tool="read_dashboard", arguments={})
    outcome = {"status": "failed", "result": "boom", "shown_hash": body["shown_hash"]}

    first = api.post(f"approvals/{body['id']}/outcome", outcome)
    second = api.post(f"approvals/{body['id']}/outcome", outcome | {"status": "succeeded"})

    assert (first.status_code, second.status_code) == (200, 409)
    assert first.json()["outcome"] == {"status": "failed", "result": "boom"}
    assert Outcome.objects.get().status == "failed" and audit.verify().is_intact


def test_two_outcome_reports_at_once_store_exactly_one(alice, bob, gated_deploy, api_as):
    body = asked(api_as(alice))
    approved = decide(api_as(bob), body).json()
    statuses, barrier = [], threading.Barrier(4)

    def report(n):
        barrier.wait()
        try:
            response = api_as(alice).post(
                f"approvals/{body['id']}/outcome", {"status": "succeeded", "result": f"run {n}", "shown_hash": approved["shown_hash"]}
            )
        finally:
            connection.close()  # this thread's
        statuses.append(response.status_code)

    threads = [threading.Thread(target=report, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(statuses) == [200, 409, 409, 409]
    assert Outcome.objects.count() == 1
    assert ToolCall.objects.get().result == Outcome.objects.get().result
    assert audit.verify().is_intact


@pytest.mark.parametrize("end", ["reject", "cancel", "expire"])
def test_no_outcome_for_a_call_that_was_not_approved(alice, gated_deploy, api_as, end):
    api = api_as(alice)
    body = asked(api, thread="t")
    if end == "reject":
        decide(api, body, "reject")
    elif end == "cancel":
        client_for(alice).post(f"/conversations/{body['conversation']}/stop/")
    else:
        Approval.objects.filter(pk=body["id"]).update(expires_at=timezone.now())

    response = api.post(f"approvals/{body['id']}/outcome", {"status": "succeeded", "shown_hash": body["shown_hash"]})

    assert response.status_code == 409
    assert Approval.objects.get(pk=body["id"]).status != Approval.Status.APPROVED
    assert not Outcome.objects.exists()


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"status": "succeeded", "result": "x" * 20_001}, "result"),
        ({"status": "succeeded", "result": "nul \u0000"}, "result"),
        ({"status": "succeeded", "result": 7}, "result"),
        ({"status": "succeeded", "result": ["x"]}, "result"),
        ({"status": 1}, "status"),
        ({"status": None}, "status"),
        ({"status": "succeeded", "shown_hash": 5}, "shown_hash"),
        ({"status": "succeeded", "shown_hash": None}, "shown_hash"),
    ],
)
def test_a_bad_outcome_is_a_400_naming_the_field_and_stores_nothing(alice, bob, gated_deploy, api_as, payload, field):
    body = asked(api_as(alice))
    approved = decide(api_as(bob), body).json()

    response = api_as(alice).post(f"approvals/{body['id']}/outcome", {"shown_hash": approved["shown_hash"]} | payload)

    assert response.status_code == 400, response.content
    assert response.json().get("field") == field
    assert not Outcome.objects.exists() and ToolCall.objects.get().status == ToolCall.Status.APPROVED


def test_an_outcome_at_the_limit_is_kept_whole(alice, bob, gated_deploy, api_as):
    body = asked(api_as(alice))
    approved = decide(api_as(bob), body).json()

    response = api_as(alice).post(f"approvals/{body['id']}/outcome", {"status": "failed", "result": "é" * 20_000, "shown_hash": approved["shown_hash"]})

    assert response.status_code == 200 and response.json()["outcome"] == {"status": "failed", "result": "é" * 20_000}


# The long poll ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("wait", ["-1", "0", "x", "1.5", "", "-" + "9" * 30])
def test_an_odd_wait_answers_at_once_or_is_a_clear_4xx(alice, gated_deploy, api_as, wait):
    body = asked(api_as(alice))

    started = time.monotonic()
    response = api_as(alice).get(f"approvals/{body['id']}", wait=wait)

    assert response.status_code in (200, 400, 422), response.content
    assert time.monotonic() - started < 2


def test_a_huge_wait_is_cut_to_the_longest_one(alice, gated_deploy, api_as, settings):
    settings.HITL_API_MAX_WAIT_SECONDS = 1
    body = asked(api_as(alice))

    started = time.monotonic()
    responses = [api_as(alice).get(f"approvals/{body['id']}", wait=wait) for wait in (10**9, "9" * 30)]

    assert [(r.status_code, r.json()["status"]) for r in responses] == [(200, "pending")] * 2
    assert time.monotonic() - started < 6


def test_a_long_poll_with_the_session_cookie_answers(alice, gated_deploy, api_as):
    body = asked(api_as(alice))

    response = client_for(alice).get(f"/api/approvals/{body['id']}", {"wait": 1})

    assert response.status_code == 200 and response.json()["id"] == body["id"]


@pytest.fixture
def member(deploy_route):
    """A route member who is not a global approver."""
    user = User.objects.create_user("dora", password="dora-password")
    user.groups.add(Group.objects.get(name="release"))
    return user


def _leaves_the_route(users):
    users["member"].groups.clear()
    return users["member"]


def _loses_the_permission(users):
    users["bob"].user_permissions.remove(Permission.objects.get(codename="decide_approval"))
    return users["bob"]


def _is_deactivated(users):
    User.objects.filter(pk=users["alice"].pk).update(is_active=False)
    return users["alice"]


@pytest.mark.parametrize(
    "poller, revoke", [("member", _leaves_the_route), ("bob", _loses_the_permission), ("alice", _is_deactivated)]
)
def test_a_wait_for_an_approval_that_stops_being_visible_ends_as_not_found(alice, bob, member, api_as, poller, revoke):
    users = {"alice": alice, "bob": bob, "member": member}
    body = asked(api_as(alice))
    api = api_as(users[poller])
    assert api.get(f"approvals/{body['id']}").status_code == 200
    results = {}

    def poll():
        try:
            results["response"] = api.get(f"approvals/{body['id']}", wait=3)
        finally:
            connection.close()  # this thread's

    polling = threading.Thread(target=poll)
    polling.start()
    time.sleep(0.5)  # lets the poll read it once: the outcome is the same either way, this only makes it mid-wait
    revoke(users)
    polling.join(timeout=10)

    assert results["response"].status_code == 404  # what it answers is read as the poller is now


# Floods and garbage ------------------------------------------------------------------------------------------


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


# An outside conversation in the app ---------------------------------------------------------------------------


def test_stop_retry_and_posting_in_an_outside_conversation_never_fail(alice, gated_deploy, api_as):
    api = api_as(alice)
    body = asked(api, thread="t")
    conversation = body["conversation"]

    posted = api.post(f"conversations/{conversation}/messages", {"content": "approve it"})
    retried = api.post(f"conversations/{conversation}/retry")
    stopped = api.post(f"conversations/{conversation}/stop")

    assert posted.status_code == 400 and retried.status_code in (400, 404, 409), retried.content
    assert stopped.status_code in (200, 202, 204), stopped.content
    assert Approval.objects.get(pk=body["id"]).status == Approval.Status.CANCELLED
    assert not Message.objects.filter(conversation_id=conversation, role="user").exists()
    again = asked(api, thread="t", arguments={"service": "db"})  # the thread takes new requests after a Stop
    assert again["status"] == "pending" and again["conversation"] == conversation
    assert json.loads(api.get(f"approvals/{body['id']}").content)["status"] == "cancelled"


def test_requests_of_one_new_thread_at_once_land_in_one_conversation(alice, gated_deploy, api_as):
    statuses, conversations, barrier = [], set(), threading.Barrier(6)

    def request(n):
        barrier.wait()
        try:
            response = ask(api_as(alice), thread="race", arguments={"service": f"s{n}"})
        finally:
            connection.close()  # this thread's
        statuses.append(response.status_code)
        if response.status_code == 201:
            conversations.add(response.json()["conversation"])

    threads = [threading.Thread(target=request, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert statuses == [201] * 6 and len(conversations) == 1
    assert Conversation.objects.get().messages.count() == 6


def test_a_page_elsewhere_cannot_ask_or_report_with_the_users_session(alice, bob, gated_deploy, api_as):
    body = asked(api_as(alice))
    approved = decide(api_as(bob), body).json()
    browser = client_for(alice, csrf=True)  # a form another site posts carries the cookie, not the CSRF token

    request = browser.post("/api/approval-requests", json.dumps({"agent": "demo", "tool": "deploy", "arguments": {}}), content_type="application/json")
    outcome = browser.post(
        f"/api/approvals/{body['id']}/outcome", json.dumps({"status": "succeeded", "shown_hash": approved["shown_hash"]}), content_type="application/json"
    )

    assert request.status_code in (401, 403) and outcome.status_code in (401, 403)
    assert ToolCall.objects.count() == 1 and not Outcome.objects.exists()
