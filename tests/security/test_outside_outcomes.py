"""Outside requests and their decisions and outcomes (issue 27): a decision on a version edited since
is refused, the requester cannot approve its own four-eyes request even in bulk, and an outcome is
reported once, only for an approved call, a bad one refused naming the field."""
import threading

import pytest
from django.db import connection
from django.utils import timezone

from approvals import audit
from approvals.models import Approval, Outcome
from chat.models import ToolCall
from tests.conftest import client_for
from tests.security.outside_api import asked, decide

pytestmark = pytest.mark.django_db(transaction=True)


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
