"""Deciding from a mailed link's page: a POST decides via email as the recipient, once, without a login,
only the version mailed (an edit voids the link); a tampered, foreign or expired token, a post without
the page's CSRF token, another method or a deactivated recipient decides nothing; a critical call asks
for its confirmation; a vote below quorum is counted."""
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from approvals import services as approval_services
from approvals import tokens
from approvals.models import Approval, DecisionToken
from approvals.deciders.routemaking import create_route
from tests.conftest import client_for, only_pending, start_conversation
from tests.emaillink.recipient import BASE, path_of, post, text_of, with_address
from tests.standins.smtp_sink import link, parts

pytestmark = pytest.mark.django_db(transaction=True)


def test_approve_decides_via_email_as_the_recipient_and_a_second_post_never_decides(pending, alice):
    approval, mail = pending

    response = post(link(mail), "approve")

    approval.refresh_from_db()
    assert response.status_code == 200 and "Approved by alice via email" in text_of(response)
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "email")
    assert "by alice via email" in text_of(client_for(alice).get(f"/conversations/{approval.conversation_id}/"))  # the card says so

    again = post(link(mail), "reject", reason="changed my mind")

    assert again.status_code == 409 and "Already decided" in text_of(again) and "Approved by alice via email" in text_of(again)
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_reject_with_a_reason(pending):
    approval, mail = pending

    response = post(link(mail), "reject", reason="not <that> file")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "email", "not <that> file")
    assert "not &lt;that&gt; file" in text_of(response)


def test_a_link_after_another_surface_decided_says_by_whom_and_how(pending, bob):
    approval, mail = pending
    approval_services.decide(approval.pk, user=bob, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")

    shown, pressed = Client().get(path_of(link(mail))), post(link(mail), "approve")

    assert "Rejected by bob via api" in text_of(shown) and "not now" in text_of(shown)
    assert pressed.status_code == 409 and "Rejected by bob via api" in text_of(pressed)
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


TAMPERED = {
    "garbage": lambda value: "not-a-token",
    "one character changed": lambda value: value[:-1] + ("A" if value[-1] != "A" else "B"),
    "signature of another": lambda value: value.split(":")[0] + ":" + "x" * 27,
    "very long": lambda value: "A" * 5000,
}


@pytest.mark.parametrize("case", TAMPERED)
def test_a_tampered_token_gets_a_403_page_and_decides_nothing(pending, case):
    approval, mail = pending
    url = BASE + "/approve/" + TAMPERED[case](path_of(link(mail)).split("/")[2]) + "/"

    shown, pressed = Client().get(path_of(url)), Client().post(path_of(url), {"decision": "approve"})

    assert shown.status_code == 403 and "not valid" in text_of(shown)
    assert pressed.status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_push_token_opens_nothing_here(pending, alice):
    approval, _ = pending
    value = tokens.issue(approval, alice, channel="push")

    assert Client().get(f"/approve/{value}/").status_code == 403
    assert post(f"{BASE}/approve/{value}/", "approve").status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_post_without_the_pages_csrf_token_decides_nothing(pending):
    approval, mail = pending

    response = Client(enforce_csrf_checks=True).post(path_of(link(mail)), {"decision": "approve"})

    assert response.status_code == 403 and Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_bad_decision_is_a_400_and_decides_nothing(pending):
    approval, mail = pending

    assert post(link(mail), "maybe").status_code == 400
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_expired_link_gets_a_403_page(pending):
    approval, mail = pending
    DecisionToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    shown, pressed = Client().get(path_of(link(mail))), post(link(mail), "approve")

    assert shown.status_code == 403 and "expired" in text_of(shown)
    assert pressed.status_code == 403 and Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_edit_after_sending_voids_the_link_says_so_and_mails_the_new_version(pending, sink, alice):
    approval, mail = pending
    approval_services.approve_edited(approval.pk, user=alice, arguments={"path": "b\u200b.txt", "content": "hello"}, via="chat",
                                     shown_hash=approval.shown_hash)
    edited = Approval.objects.get(pk=approval.pk)
    assert edited.status == "pending"

    shown, pressed = Client().get(path_of(link(mail))), post(link(mail), "approve")

    assert "edited since this mail" in text_of(shown) and f"/conversations/{approval.conversation_id}/" in text_of(shown)
    assert pressed.status_code == 409 and "edited since this mail" in text_of(pressed)
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    first, second = sink.messages("alice@example.org")
    assert "⟨U+200B⟩" in parts(second)["text/plain"] and link(second) != link(first)
    assert post(link(second), "approve").status_code == 200
    edited.refresh_from_db()
    assert (edited.status, edited.approved_arguments["path"]) == ("approved", "b\u200b.txt")


def test_a_critical_call_asks_for_its_confirmation_on_the_page(sink, alice, agent):
    with_address(alice)
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    assert approval.confirmation_required
    (mail,) = sink.messages()
    assert approval.confirmation_hint in parts(mail)["text/plain"]
    assert 'name="confirmation"' in text_of(Client().get(path_of(link(mail))))

    refused = post(link(mail), "approve", confirmation="yes")

    assert refused.status_code == 400 and "Type the confirmation" in text_of(refused)
    assert Approval.objects.get(pk=approval.pk).status == "pending" and not DecisionToken.objects.filter(used_at__isnull=False).exists()
    assert post(link(mail), "approve", confirmation=approval.confirmation_hint).status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_a_vote_below_quorum_is_counted_and_the_page_says_so(sink, alice, agent):
    finance = Group.objects.create(name="finance")
    dana, erin = (with_address(User.objects.create_user(name)) for name in ("dana", "erin"))
    for user in (dana, erin):
        user.groups.add(finance)
    create_route(created_by=None, agent=agent.slug, approvers=["finance"], quorum=2)
    approval = only_pending(start_conversation(alice, agent, "delete a.txt"))
    assert approval.quorum == 2 and sorted(m["To"] for m in sink.messages()) == ["dana@example.org", "erin@example.org"]

    voted = post(link(sink.messages("dana@example.org")[0]), "approve")

    assert voted.status_code == 200 and "Your vote is counted" in text_of(voted) and "1 of 2 approvals: dana" in text_of(voted)
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    again = post(link(sink.messages("dana@example.org")[0]), "approve")
    assert again.status_code == 409 and "already used" in text_of(again)
    assert post(link(sink.messages("erin@example.org")[0]), "approve").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_the_pages_own_form_decides_without_a_login(pending, alice):
    approval, mail = pending
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(path_of(link(mail))).content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]

    response = browser.post(path_of(link(mail)), {"csrfmiddlewaretoken": csrf, "decision": "approve"})

    approval.refresh_from_db()
    assert response.status_code == 200 and (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "email")


def test_other_methods_and_a_deactivated_recipient_decide_nothing(pending, alice):
    approval, mail = pending
    url = path_of(link(mail))

    assert Client().put(url, "decision=approve").status_code == 405
    assert Client().delete(url).status_code == 405
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert Client().get(url).status_code == 403 and post(link(mail), "approve").status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_oversized_reason_is_cut_and_stored(pending):
    approval, mail = pending

    assert post(link(mail), "reject", reason="x" * 100_000).status_code == 200

    assert Approval.objects.get(pk=approval.pk).rejection_reason.startswith("x" * 100)
