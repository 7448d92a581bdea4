"""The delegations page (issue 25, item 4): an approver hands their approvals to a colleague for a
window, sees what they gave and received, ends one early; errors are said in the form, never a 500."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Delegation
from tests.conftest import client_for
from tests.approvals.conftest import member

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/approvals/delegations/"


def local(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def window(**shift) -> dict:
    now = timezone.now()
    return {"starts": local(now - timedelta(minutes=5)), "ends": local(now + timedelta(days=shift.get("days", 7)))}


def test_an_approver_delegates_from_the_form_and_both_sides_see_it(bob, carol):
    response = client_for(bob, csrf=False).post(f"{URL}new/", {"to": "carol", **window()})

    assert response.status_code == 302 and response["Location"] == URL
    [delegation] = Delegation.objects.all()
    assert (delegation.delegator, delegation.delegate, delegation.ended_at) == (bob, carol, None)
    assert delegation.ends_at - delegation.starts_at > timedelta(days=7)
    given = client_for(bob).get(URL).content.decode()
    received = client_for(carol).get(URL).content.decode()
    assert f'id="delegation-{delegation.pk}"' in given and "carol" in given and ">active</span>" in given
    assert f'id="delegation-{delegation.pk}"' in received and "End now" in received


def test_a_route_member_without_global_permission_may_delegate_too(agent):
    from tests.approvals.cards.test_cards import finance_route

    dana = member("dana", "finance")
    member("erin")
    finance_route(agent)

    assert "Delegate your approvals" in client_for(dana).get(URL).content.decode()
    assert client_for(dana).post(f"{URL}new/", {"to": "erin", **window()}).status_code == 302
    assert Delegation.objects.get().delegator == dana


@pytest.mark.parametrize(
    "form, says",
    [
        ({"to": "bob"}, "You cannot delegate to yourself."),
        ({"to": "nobody"}, "Unknown user 'nobody'."),
        ({"to": "carol", "ends": "2001-01-01T00:00"}, "The end must be after the start."),
        ({"to": "carol", "starts": "2001-01-01T00:00", "ends": "2001-01-02T00:00"}, "The end must be in the future"),
        ({"to": "carol", "starts": "tomorrow"}, "Give the start as a date and time"),
        ({"to": "carol", "ends": ""}, "Give the end as a date and time"),
        ({"to": "\x00carol"}, "“To” is a username."),
    ],
)
def test_a_bad_delegation_is_said_in_the_form_and_nothing_is_saved(bob, carol, form, says):
    response = client_for(bob).post(f"{URL}new/", {**window(), **form})

    assert response.status_code == 400
    page = response.content.decode()
    assert 'role="alert"' in page and says.replace("'", "&#x27;") in page
    assert not Delegation.objects.exists()


def test_who_may_decide_nothing_may_not_delegate(alice, carol):
    assert client_for(alice).get(URL).status_code == 403
    refused = client_for(alice).post(f"{URL}new/", {"to": "carol", **window()})
    assert refused.status_code == 403
    assert not Delegation.objects.exists()
    assert "Delegations" not in client_for(alice).get("/").content.decode()
    assert "Delegations" in client_for(carol).get("/").content.decode()


def test_end_now_ends_it_for_both_sides_and_only_they_may(bob, carol, mallory):
    client_for(bob).post(f"{URL}new/", {"to": "carol", **window()})
    delegation = Delegation.objects.get()

    assert client_for(mallory).post(f"{URL}{delegation.pk}/end/").status_code == 404
    delegation.refresh_from_db()
    assert delegation.ended_at is None

    assert client_for(carol).post(f"{URL}{delegation.pk}/end/").status_code == 302
    delegation.refresh_from_db()
    assert delegation.ended_at is not None and delegation.ended_by == carol
    page = client_for(bob).get(URL).content.decode()
    assert "ended early" in page and "End now" not in page


def test_the_forms_need_a_csrf_token(bob, carol):
    client = client_for(bob, csrf=True)
    assert client.post(f"{URL}new/", {"to": "carol", **window()}).status_code == 403
    assert not Delegation.objects.exists()


def test_the_page_needs_a_login():
    from django.test import Client

    assert Client().get(URL).status_code == 302
