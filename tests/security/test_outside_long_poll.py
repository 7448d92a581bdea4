"""The approval-requests API's long poll (issue 27): an odd wait answers at once or is a clear 4xx, a
huge one is cut to the longest, the session cookie works, and a wait for an approval that stops being
visible ends as not found."""
import threading
import time

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection

from tests.conftest import client_for
from tests.security.outside_api import asked

pytestmark = pytest.mark.django_db(transaction=True)


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
