"""The approval-requests API attacked as an outsider would (issue 27): another user's threads and
approvals (never joined, read as ones that do not exist, never reported on), a routed request seen
only by its requester and its route; and an outside conversation in the app, which a page elsewhere
cannot drive with the user's session. Each refusal is a clear 4xx that stores nothing."""
import json
import threading
import time

import pytest
from django.db import connection

from approvals.models import Approval, Outcome
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for
from tests.security.outside_api import ask, asked, decide

pytestmark = pytest.mark.django_db(transaction=True)


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
