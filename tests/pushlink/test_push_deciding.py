"""Deciding with a notification's token: via push as the subscriber, once, only the version shown, the
outcome replacing the notification; a tampered, foreign, expired or deactivated user's token is 403
and a post that is no decision 400; the reject form a notification's Reject opens."""
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from approvals import services as approval_services
from approvals import tokens
from approvals.models import Approval, DecisionToken
from pushlink import texts
from pushlink.models import PushNotification
from tests.conftest import only_pending, start_conversation
from tests.pushlink.devices import decide, requests_to, through_the_loop

pytestmark = pytest.mark.django_db


@through_the_loop
def test_approve_decides_via_push_as_the_subscriber_and_the_outcome_replaces_the_notification(pending, fake, alice):
    approval, shown, phone = pending

    status, answer = decide(shown["tokens"]["approve"], "approve")

    assert (status, answer["outcome"], answer["message"]) == (200, "approved", "Approved.")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "push")
    decided = [m for m in fake.messages(phone["endpoint"]) if m["type"] == "decided"]
    assert len(decided) == 1 and decided[0]["tag"] == shown["tag"]
    assert decided[0]["body"].startswith("Approved by alice via push at ") and decided[0]["tokens"] == {}
    assert PushNotification.objects.get().status == "closed"


@through_the_loop
def test_reject_with_a_reason_stores_the_reason(pending, fake):
    approval, shown, phone = pending

    status, answer = decide(shown["tokens"]["reject"], "reject", reason="  not on a Friday ")

    approval.refresh_from_db()
    assert (status, approval.status, approval.rejection_reason, approval.decided_via) == (200, "rejected", "not on a Friday", "push")
    assert fake.messages(phone["endpoint"])[-1]["body"].endswith(": not on a Friday")


@through_the_loop
def test_a_token_decides_once(pending):
    approval, shown, _ = pending
    assert decide(shown["tokens"]["approve"], "approve")[0] == 200

    status, answer = decide(shown["tokens"]["approve"], "approve")

    assert (status, answer["outcome"]) == (409, "used")
    assert Approval.objects.get(pk=approval.pk).status == "approved"


@through_the_loop
def test_a_late_action_after_another_surface_decided_says_by_whom_and_changes_nothing(pending, fake, alice):
    approval, shown, phone = pending
    approval_services.decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")
    assert [m["type"] for m in fake.messages(phone["endpoint"])] == ["request", "decided"]  # replaced at once

    status, answer = decide(shown["tokens"]["approve"], "approve")

    assert (status, answer["outcome"], answer["decided_by"], answer["decided_via"]) == (409, "already decided", "alice", "api")
    assert answer["message"].startswith("Too late: Rejected by alice via api at ") and answer["message"].endswith(": not now.")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"
    assert DecisionToken.objects.filter(used_at__isnull=False).count() == 0


@through_the_loop
def test_an_edit_after_sending_voids_the_old_tokens_and_sends_the_new_version(pending, fake, alice, settings):
    settings.HITL_PUSH_SENTENCE_ONLY_RISKS = ["critical"]  # the edit makes it high risk: shown whole all the same
    approval, shown, phone = pending
    # An invisible character makes the edit riskier: stricter, so it waits for a decision on the new version.
    approval_services.approve_edited(approval.pk, user=alice, arguments={"path": "b\u200b.txt", "content": "hello"}, via="chat",
                                     shown_hash=approval.shown_hash)
    edited = Approval.objects.get(pk=approval.pk)
    assert edited.status == "pending" and edited.shown_hash != approval.shown_hash

    status, answer = decide(shown["tokens"]["approve"], "approve")

    assert (status, answer["outcome"]) == (409, "changed")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    first, second = requests_to(fake, phone, approval)
    assert second["tag"] == first["tag"] and "⟨U+200B⟩" in second["body"] and edited.risk in second["title"]
    assert PushNotification.objects.get().shown_hash == edited.shown_hash
    assert decide(second["tokens"]["approve"], "approve")[0] == 200
    edited.refresh_from_db()
    assert (edited.status, edited.approved_arguments["path"]) == ("approved", "b\u200b.txt")


@through_the_loop
def test_a_quorum_vote_from_a_notification_is_impossible_routed_calls_offer_view_only(fake, alice, agent):
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    Approval.objects.filter(pk=approval.pk).update(quorum=2)

    assert not texts.offers_actions(Approval.objects.get(pk=approval.pk))


def reject_form(token: str, reason: str):
    """As a browser does: GET the page (its CSRF cookie), read the call, POST the form."""
    browser = Client(enforce_csrf_checks=True)
    page = browser.get("/push/reject/")
    csrf = browser.cookies["csrftoken"].value
    called = browser.post("/push/reject/call", json.dumps({"token": token}), content_type="application/json")
    return page, called, browser.post("/push/reject/", {"token": token, "reason": reason, "csrfmiddlewaretoken": csrf})


@through_the_loop
def test_the_reject_form_names_the_call_asks_why_and_rejects_with_the_reason(pending, alice):
    approval, shown, _ = pending

    page, called, posted = reject_form(shown["tokens"]["reject"], "  wrong file ")

    assert page.status_code == 200 and 'name="reason"' in page.content.decode() and "pushlink/reject.js" in page.content.decode()
    assert called.json() | {} == {"approval_id": approval.pk, "url": texts.view_url(approval), "state": "form",
                                  "sentence": "Write a.txt (5 bytes)", "asked_by": "alice (Demo agent)", "risk": "medium"}
    assert posted.status_code == 200 and "Rejected by alice via push" in posted.content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_by, approval.decided_via) == ("rejected", "wrong file", alice, "push")


@through_the_loop
def test_opening_the_reject_form_decides_nothing_and_a_post_without_csrf_is_refused(pending):
    approval, shown, _ = pending

    assert Client().get("/push/reject/").status_code == 200
    assert Client().post("/push/reject/call", json.dumps({"token": shown["tokens"]["reject"]}), content_type="application/json").status_code == 200
    assert Client(enforce_csrf_checks=True).post("/push/reject/", {"token": shown["tokens"]["reject"]}).status_code == 403

    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert not DecisionToken.objects.filter(used_at__isnull=False).exists()


@through_the_loop
def test_the_reject_form_with_a_bad_used_or_foreign_token_says_so_and_decides_nothing(pending, alice):
    approval, shown, _ = pending
    email_token = tokens.issue(approval, alice, channel="email")

    for forged in ("garbage", email_token, ""):
        _, called, posted = reject_form(forged, "no")
        assert called.status_code == 403 and called.json()["state"] == "invalid"
        assert posted.status_code in (400, 403) and "Nothing was rejected" in posted.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert reject_form(shown["tokens"]["reject"], "once")[2].status_code == 200
    _, called, posted = reject_form(shown["tokens"]["reject"], "twice")
    assert called.json()["state"] == "already decided" and called.json()["message"].startswith("Already decided: Rejected by alice")
    assert posted.status_code == 409 and Approval.objects.get(pk=approval.pk).rejection_reason == "once"


BAD_BODIES = ["", "{", "[]", '"token"', '{"token": 1, "decision": "approve"}', '{"token": "x", "decision": "maybe"}',
              '{"token": "x"}', '{"token": "x", "decision": "approve", "reason": 5}', "\xff\xfe"]


@pytest.mark.parametrize("body", BAD_BODIES)
def test_a_decide_post_that_is_no_decision_is_400(body):
    response = Client().post("/push/decide", body, content_type="application/json")

    assert response.status_code == 400 and response.json()["outcome"] == "bad request"


@through_the_loop
def test_a_tampered_or_foreign_token_is_403_and_decides_nothing(pending, alice):
    approval, shown, _ = pending
    token = shown["tokens"]["approve"]
    email_token = tokens.issue(approval, alice, channel="email")

    for forged in (token[:-2] + ("AA" if not token.endswith("AA") else "BB"), token.replace(":", ";", 1), "x" * 60, email_token):
        status, answer = decide(forged, "approve")
        assert (status, answer["outcome"]) == (403, "invalid"), forged

    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert not DecisionToken.objects.filter(used_at__isnull=False).exists()


@through_the_loop
def test_a_token_of_a_user_deactivated_since_is_403(pending, alice):
    approval, shown, _ = pending
    User.objects.filter(pk=alice.pk).update(is_active=False)

    assert decide(shown["tokens"]["approve"], "approve")[0] == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_an_expired_token_is_403(pending):
    approval, shown, _ = pending
    DecisionToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert decide(shown["tokens"]["approve"], "approve") == (403, {"outcome": "expired", "message": "This notification has expired: open the site."})
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_decide_takes_only_post(client):
    assert client.get("/push/decide").status_code == 405
