"""Slack's signed endpoints, attacked: forged, stale, unsigned, replayed and garbage requests are
refused and change nothing, a body too large or sent as JSON is refused, a modal submitted with
another person's token or a deactivated user's press decides nothing, and no signed payload gets a 500."""
import json
import time
import uuid
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from approvals.models import Approval
from slacklink import accounts, blocks, verification
from slacklink.models import SeenRequest, SlackAccount
from tests.slacklink.workspace import ALICE, MALLORY, STRANGER, link, through_the_loop
from tests.standins.fake_slack import TEAM, sign

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/slack/commands/", "/slack/interactions/"])
def test_a_forged_stale_or_unsigned_request_is_refused_and_changes_nothing(fake, alice, path):
    body = urlencode({"team_id": TEAM, "user_id": ALICE, "text": f"link {accounts.issue_code(alice)}",
                      "payload": json.dumps({"type": "block_actions"})})
    forged = sign("not-the-secret", body)
    # Well outside the five minutes either way: a request signed 301 s ahead became valid once the
    # seconds spent on the earlier cases brought the clock within 300 s of it (seen in CI under load).
    old = sign(fake.signing_secret, body, timestamp=int(time.time()) - 360)
    future = sign(fake.signing_secret, body, timestamp=int(time.time()) + 360)
    tampered = sign(fake.signing_secret, body)
    for headers in (forged, old, future, {"Content-Type": "application/x-www-form-urlencoded"},
                    {**tampered, "X-Slack-Signature": "v0=" + "0" * 64}, {**tampered, "X-Slack-Request-Timestamp": "soon"},
                    {**tampered, "X-Slack-Signature": "v1=abc"}, {**tampered, "X-Slack-Request-Timestamp": "٣٣٣"}):
        status, _ = fake.deliver(path, body, headers=headers)
        assert status == 401, headers
    status, _ = fake.deliver(path, body + "&text=link+OTHER", headers=tampered)  # signed, then changed
    assert status == 401
    assert not SlackAccount.objects.exists() and not SeenRequest.objects.exists()


def test_a_replayed_command_is_refused(fake, alice):
    body = urlencode({"team_id": TEAM, "user_id": ALICE, "text": "unlink"})
    headers = sign(fake.signing_secret, body)
    assert fake.deliver("/slack/commands/", body, headers=headers)[0] == 200
    assert fake.deliver("/slack/commands/", body, headers=headers)[0] == 409


def test_garbage_interactions_get_a_4xx_or_are_ignored_never_a_500(fake, alice):
    for body in ["", "payload=", "payload=not-json", "payload=%5B1%2C2%5D", "payload=%22text%22", "nothing=1", "payload=%FF%FE"]:
        assert fake.deliver("/slack/interactions/", body)[0] == 400, body
    link(fake, alice, ALICE)
    for payload in [{}, {"type": "block_actions"}, {"type": "block_actions", "actions": "x"}, {"type": "block_actions", "actions": [None]},
                    {"type": "block_actions", "user": "UALICE", "actions": [{"action_id": "approve", "value": "x"}]},
                    {"type": "block_actions", "user": {"id": ALICE}, "team": {"id": TEAM}, "actions": [{"action_id": "approve", "value": 12}]},
                    {"type": "block_actions", "user": {"id": ALICE}, "team": {"id": TEAM}, "actions": [{"action_id": "choose", "value": "99999999.x"}]},
                    {"type": "view_submission", "view": None}, {"type": "view_submission", "user": {"id": ALICE}, "team": {"id": TEAM},
                                                                "view": {"callback_id": "hitl_reason", "private_metadata": ["x"]}},
                    {"type": "shortcut"}, {"type": None}]:
        status, _ = fake.interact(payload)
        assert status == 200, payload


def test_the_endpoints_are_off_without_slack_and_take_only_post(fake, settings):
    assert Client().get("/slack/interactions/").status_code == 405
    assert Client().get("/slack/commands/").status_code == 405
    settings.SLACK_SIGNING_SECRET = ""
    assert fake.command(ALICE, "unlink")[0] == 404


def test_a_body_too_large_is_refused(fake):
    body = "payload=" + "x" * 300_000
    assert fake.deliver("/slack/interactions/", body)[0] == 413


def test_old_signatures_are_forgotten_by_the_sweep(fake):
    SeenRequest.objects.create(signature="v0=old")
    SeenRequest.objects.filter(signature="v0=old").update(seen_at=timezone.now() - timedelta(minutes=11))
    verification.forget_old()
    assert not SeenRequest.objects.exists()


def test_a_signed_body_sent_as_json_is_refused_with_400(fake):
    body = json.dumps({"type": "block_actions"})
    headers = {**sign(fake.signing_secret, body), "Content-Type": "application/json"}
    assert fake.deliver("/slack/interactions/", body, headers=headers)[0] == 400


@through_the_loop
def test_a_modal_submitted_with_another_persons_token_decides_nothing(pending, fake, alice, mallory):
    approval, message = pending
    fake.press(ALICE, message, "Reject")
    link(fake, mallory, MALLORY)

    status, body = fake.submit(MALLORY, fake.views()[-1], {"reason": "mine now"})

    assert status == 200 and json.loads(body)["errors"]["reason"] == "This request is no longer known."
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_deactivated_users_link_presses_nothing(pending, fake, alice):
    approval, message = pending
    User.objects.filter(pk=alice.pk).update(is_active=False)
    fake.press(ALICE, message, "Approve")
    assert "not linked" in fake.ephemerals(ALICE)[-1]
    assert Approval.objects.get(pk=approval.pk).status == "pending"


# Payloads shaped like Slack's, their values anything JSON holds: signed, so they reach the handler.
_ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_PAYLOADS = st.fixed_dictionaries({
    "type": st.sampled_from(["block_actions", "view_submission", "shortcut"]) | _ANY,
    "user": st.fixed_dictionaries({"id": st.sampled_from([ALICE, STRANGER]) | _ANY, "team_id": st.just(TEAM) | _ANY}) | _ANY,
    "team": st.fixed_dictionaries({"id": st.just(TEAM) | _ANY}) | _ANY,
    "actions": st.lists(st.fixed_dictionaries({
        "action_id": st.sampled_from([blocks.APPROVE, blocks.REJECT, blocks.CHOOSE, blocks.SELECT, blocks.ANSWER]) | _ANY,
        "value": _ANY, "selected_option": _ANY,
    }), max_size=2) | _ANY,
    "view": st.fixed_dictionaries({"callback_id": st.sampled_from([blocks.REASON_VIEW, blocks.CONFIRM_VIEW]) | _ANY,
                                   "private_metadata": _ANY, "state": _ANY}) | _ANY,
    "container": _ANY, "channel": _ANY, "trigger_id": _ANY,
})


@through_the_loop
def test_any_signed_payload_is_answered_without_a_500_and_decides_nothing(pending, fake):
    approval, _ = pending

    @hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_PAYLOADS)
    def check(payload):
        status, _ = fake.interact(payload | {"api_app_id": uuid.uuid4().hex})  # never a replay of an earlier example
        assert status in (200, 400)

    check()
    assert Approval.objects.get(pk=approval.pk).status == "pending"
