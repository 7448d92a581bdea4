"""The four channels rebuilt for issue 35 (push, email, Slack, Telegram), attacked as an outsider
would: approving through anything that showed the call cut, tokens carried to another approval,
person, route or channel, Extend and Ask again by someone who may not, tokens in what is logged,
and input no form should take (oversized, NUL, lone surrogates, malformed JSON): each is refused
with a clear 4xx, decides nothing and spends nothing."""
import json
import logging
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from approvals import tokens
from approvals.models import Approval, DecisionToken, LateDecision, Vote
from pushlink import channel as push_channel
from pushlink.models import PushNotification
from tests.conftest import pending_approvals, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)
CSRF = "k" * 32


def one(user, agent, text="write hello to a.txt") -> Approval:
    (approval,) = pending_approvals(start_conversation(user, agent, text))
    return approval


def with_deadline(approval: Approval, minutes: int = 30) -> Approval:
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=minutes))
    return Approval.objects.get(pk=approval.pk)


def unchanged(approval: Approval, *unspent: str) -> None:
    """Nothing decided, counted or kept; each token named still unspent."""
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert not Vote.objects.filter(approval=approval).exists()
    assert not LateDecision.objects.filter(approval=approval).exists()
    for value in unspent:
        assert tokens.open_token(value).token.used_at is None


def push(path: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    response = Client().post(path, data, content_type="application/json")
    assert response["Content-Type"].startswith("application/json")
    return response.status_code, response.json()


def reject_form(value: str, reason: str):
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = CSRF
    return browser.post("/push/reject/", {"token": value, "reason": reason, "csrfmiddlewaretoken": CSRF})


def email_post(value: str, decision: str, **fields):
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = CSRF
    return browser.post(f"/approve/{value}/", {"decision": decision, "csrfmiddlewaretoken": CSRF, **fields})


# --- Approving through what showed the call cut ------------------------------------------------------


def test_a_push_reject_token_or_a_cut_notifications_token_never_approves(alice, agent):
    approval = one(alice, agent)
    offered = push_channel.offered_tokens(approval, alice, whole=False)
    assert set(offered) == {"reject"}  # a cut notification carries no approve token at all
    also_cut = tokens.issue(approval, alice, channel="push", complete=False)

    for value in (offered["reject"], also_cut):
        status, body = push("/push/decide", {"token": value, "decision": "approve"})
        assert (status, body["outcome"]) == (409, "decide on the site")

    unchanged(approval, offered["reject"], also_cut)
    assert push("/push/decide", {"token": offered["reject"], "decision": "reject"})[0] == 200


def test_a_whole_notifications_reject_token_never_approves_either(alice, agent):
    approval = one(alice, agent)
    offered = push_channel.offered_tokens(approval, alice, whole=True)

    status, _ = push("/push/decide", {"token": offered["reject"], "decision": "approve"})

    assert status == 409
    unchanged(approval, offered["reject"])


def test_the_email_reject_links_token_posted_as_approve_is_refused_and_left_unspent(alice, agent):
    approval = one(alice, agent)
    reject_only = tokens.issue(approval, alice, channel="email", complete=False)

    response = email_post(reject_only, "approve")

    assert response.status_code == 409 and "it can only reject" in response.content.decode()
    unchanged(approval, reject_only)
    assert email_post(reject_only, "reject", reason="no").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.REJECTED


# --- Tokens crossing over -------------------------------------------------------------------------


def test_a_push_token_is_nothing_at_the_email_page_and_an_email_token_nothing_at_push(alice, agent):
    approval = one(alice, agent)
    push_token = tokens.issue(approval, alice, channel="push")
    email_token = tokens.issue(approval, alice, channel="email")

    assert Client().get(f"/approve/{push_token}/").status_code == 403
    assert email_post(push_token, "approve").status_code == 403
    assert push("/push/decide", {"token": email_token, "decision": "approve"})[0] == 403
    assert push("/push/reject/call", {"token": email_token})[0] == 403
    assert reject_form(email_token, "no").status_code == 403

    unchanged(approval, push_token, email_token)


def test_a_token_for_one_approval_rejects_that_one_only_whatever_form_it_is_posted_for(alice, agent):
    first, second = one(alice, agent), one(alice, agent, "write bye to b.txt")
    value = tokens.issue(first, alice, channel="push", complete=False)

    assert reject_form(value, "no").status_code == 200

    assert Approval.objects.get(pk=first.pk).status == Approval.Status.REJECTED
    unchanged(second)


def test_an_extend_token_extends_only_its_approval_once_and_never_after_a_decision(alice, bob, agent):
    approval, other = with_deadline(one(alice, agent)), with_deadline(one(alice, agent, "write bye to b.txt"))
    row = PushNotification(approval_id=approval.pk, user_id=alice.pk)
    value = push_channel.extend_token(row)

    # Another approval's id spliced into the token breaks its signature.
    payload = json.dumps({"a": other.pk, "u": bob.pk})
    assert push("/push/extend", {"token": value.replace(value.split(":")[0], payload)})[0] == 403
    assert push("/push/extend", {"token": value})[0] == 200
    assert push("/push/extend", {"token": value})[0] == 409
    assert Approval.objects.get(pk=other.pk).extended_at is None

    decided = with_deadline(one(alice, agent, "write x to c.txt"))
    late = push_channel.extend_token(PushNotification(approval_id=decided.pk, user_id=alice.pk))
    Approval.objects.filter(pk=decided.pk).update(status=Approval.Status.REJECTED, decided_at=timezone.now())
    status, body = push("/push/extend", {"token": late})
    assert (status, body["outcome"]) == (409, "already decided")


def test_an_extend_token_of_someone_who_may_not_decide_extends_nothing(alice, mallory, agent):
    approval = with_deadline(one(alice, agent))
    value = push_channel.extend_token(PushNotification(approval_id=approval.pk, user_id=mallory.pk))

    assert push("/push/extend", {"token": value})[0] == 403
    assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_an_extend_after_the_deadline_is_refused_as_too_late(alice, agent):
    approval = with_deadline(one(alice, agent))
    value = push_channel.extend_token(PushNotification(approval_id=approval.pk, user_id=alice.pk))
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    status, _ = push("/push/extend", {"token": value})

    assert status == 409 and Approval.objects.get(pk=approval.pk).extended_at is None


def test_reject_call_tells_the_call_to_its_tokens_holder_only(alice, agent):
    approval = one(alice, agent)
    fresh = tokens.issue(approval, alice, channel="push", complete=False)
    used = tokens.issue(approval, alice, channel="push", complete=False)
    expired = tokens.issue(approval, alice, channel="push", complete=False, lifetime=timedelta(seconds=-1))
    DecisionToken.objects.filter(pk=tokens.open_token(used).token.pk).update(used_at=timezone.now())

    for value in ("", "x" * 400, fresh[:-3] + "abc"):
        status, body = push("/push/reject/call", {"token": value})
        assert status == 403 and "sentence" not in body
    for value in (used, expired):
        status, body = push("/push/reject/call", {"token": value})
        assert "sentence" not in body and "a.txt" not in json.dumps(body)
    assert "a.txt" in push("/push/reject/call", {"token": fresh})[1]["sentence"]


# --- Bad input: a clear 4xx or a stored reason, never a 500, nothing lost -------------------------------

UNSTORABLE = ["no\x00pe", "no\ud800pe", "x" * 9_000]  # a longer body is refused whole (test below)


@pytest.mark.parametrize("reason", UNSTORABLE, ids=["nul", "surrogate", "oversized"])
def test_a_reject_reason_no_database_stores_as_is_still_rejects_from_a_notification(alice, agent, reason):
    approval = one(alice, agent)
    value = tokens.issue(approval, alice, channel="push", complete=False)

    status, _ = push("/push/decide", json.dumps({"token": value, "decision": "reject", "reason": reason}).encode())

    rejected = Approval.objects.get(pk=approval.pk)
    assert status == 200 and rejected.status == Approval.Status.REJECTED
    assert "\x00" not in rejected.rejection_reason and "\ud800" not in rejected.rejection_reason
    assert rejected.rejection_reason.startswith("no") or len(rejected.rejection_reason) <= 2000


def test_a_decision_body_past_the_routes_limit_is_a_400_that_decides_and_spends_nothing(alice, agent):
    approval = one(alice, agent)
    value = tokens.issue(approval, alice, channel="push", complete=False)

    status, body = push("/push/decide", {"token": value, "decision": "reject", "reason": "x" * 50_000})

    assert status == 400 and body["message"]
    unchanged(approval, value)


def raw_form(path: str, body: str):
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = CSRF
    return browser.post(path, f"csrfmiddlewaretoken={CSRF}&{body}", content_type="application/x-www-form-urlencoded")


@pytest.mark.parametrize("encoded", ["no%00pe", "no%ED%A0%80pe", "x" * 50_000], ids=["nul", "surrogate", "oversized"])
def test_a_reject_reason_no_database_stores_as_is_still_rejects_from_the_push_and_email_forms(alice, agent, encoded):
    by_push, by_mail = one(alice, agent), one(alice, agent, "write bye to b.txt")
    push_token = tokens.issue(by_push, alice, channel="push", complete=False)
    mail_token = tokens.issue(by_mail, alice, channel="email", complete=False)

    pushed = raw_form("/push/reject/", f"token={push_token}&reason={encoded}")
    mailed = raw_form(f"/approve/{mail_token}/", f"decision=reject&reason={encoded}")

    for response, approval in ((pushed, by_push), (mailed, by_mail)):
        rejected = Approval.objects.get(pk=approval.pk)
        assert response.status_code == 200 and rejected.status == Approval.Status.REJECTED
        assert "\x00" not in rejected.rejection_reason and len(rejected.rejection_reason) <= 2000


@pytest.mark.parametrize("path", ["/push/decide", "/push/extend", "/push/reject/call"])
@pytest.mark.parametrize("body", [
    b"", b"{", b"[]", b"null", b'"token"', b"\xff\xfe", b'{"token": null}', b'{"token": ["a"]}', b'{"token": "\\ud800"}',
    b'{"token": "a\\u0000b", "decision": "reject"}', b'{"token": 1e999}', b'{"token": "x", "decision": "approve", "reason": 5}',
    b"[" * 5000, b'{"token": "' + b"a" * 20_000 + b'"}',
])
def test_malformed_json_to_the_push_routes_is_a_clear_4xx(alice, agent, path, body):
    approval = one(alice, agent)

    status, answer = push(path, body)

    assert 400 <= status < 500 and (answer.get("message") or answer.get("detail"))
    unchanged(approval)


# --- Telegram: a press or a typed reply through a cut message never approves ---------------------------

ALICE_TG, BOB_TG, MALLORY_TG = 3001, 3002, 3004


@pytest.fixture
def telegram(settings):
    from tests.standins.fake_telegram import FakeTelegram

    with FakeTelegram() as fake:
        settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = fake.token, fake.url
        yield fake


def tg_say(telegram_id: int, text: str) -> None:
    from telegramlink import updates

    updates.handle({"update_id": 1, "message": {
        "message_id": 7, "date": 0, "text": text, "chat": {"id": telegram_id, "type": "private"},
        "from": {"id": telegram_id, "is_bot": False, "first_name": "someone"},
    }})


def tg_press(fake, telegram_id: int, data: str, query_id: str) -> str | None:
    from telegramlink import updates

    updates.handle({"update_id": 2, "callback_query": {
        "id": query_id, "chat_instance": "1", "data": data, "from": {"id": telegram_id, "is_bot": False, "first_name": "someone"},
    }})
    return fake.answer_to(query_id)


def tg_link(user, telegram_id: int) -> None:
    from telegramlink import accounts

    tg_say(telegram_id, f"/start {accounts.issue_code(user)}")


def tg_version(approval: Approval, user):
    from telegramlink.models import SentVersion

    return SentVersion.objects.get(message__approval=approval, message__account__user=user)


def test_a_forged_approve_press_and_a_typed_confirmation_under_a_cut_telegram_message_approve_nothing(telegram, alice, agent, settings):
    settings.HITL_TELEGRAM_SENTENCE_ONLY_RISKS = ["critical"]
    tg_link(alice, ALICE_TG)
    approval = one(alice, agent, "delete all files")
    version = tg_version(approval, alice)
    assert approval.confirmation_required and not version.complete

    assert tg_press(telegram, ALICE_TG, f"a:{version.token}", "q1").startswith("This message showed the call cut")
    tg_say(ALICE_TG, approval.confirmation_hint)  # no confirmation was asked for: it decides nothing
    unchanged(approval)

    # Under the cut message's "Why reject?", the typed confirmation is only a reason.
    tg_press(telegram, ALICE_TG, f"R:{version.token}", "q2")
    tg_say(ALICE_TG, approval.confirmation_hint)
    rejected = Approval.objects.get(pk=approval.pk)
    assert (rejected.status, rejected.rejection_reason) == (Approval.Status.REJECTED, approval.confirmation_hint)


def test_a_telegram_press_with_the_token_of_another_persons_copy_decides_nothing(telegram, alice, bob, agent):
    tg_link(alice, ALICE_TG)
    tg_link(bob, BOB_TG)
    approval = one(alice, agent)
    alices = tg_version(approval, alice)

    said = tg_press(telegram, BOB_TG, f"a:{alices.token}", "q1")

    assert said == "You may not decide this request."
    unchanged(approval)


def test_extend_pressed_by_a_linked_telegram_user_who_may_not_decide_extends_nothing(telegram, alice, mallory, agent):
    tg_link(alice, ALICE_TG)
    tg_link(mallory, MALLORY_TG)
    approval = with_deadline(one(alice, agent))
    alices = tg_version(approval, alice)

    tg_press(telegram, MALLORY_TG, f"x:{alices.token}", "q1")

    assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_extend_pressed_after_the_deadline_on_telegram_is_too_late_and_extends_nothing(telegram, alice, agent):
    tg_link(alice, ALICE_TG)
    approval = with_deadline(one(alice, agent))
    version = tg_version(approval, alice)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    said = tg_press(telegram, ALICE_TG, f"x:{version.token}", "q1")

    assert said.startswith("Too late") and Approval.objects.get(pk=approval.pk).extended_at is None


@pytest.mark.parametrize("reason", ["no\x00pe", "no\ud800pe", "x" * 50_000], ids=["nul", "surrogate", "oversized"])
def test_a_typed_telegram_reason_no_database_stores_as_is_still_rejects(telegram, alice, agent, reason):
    tg_link(alice, ALICE_TG)
    approval = one(alice, agent)
    tg_press(telegram, ALICE_TG, f"R:{tg_version(approval, alice).token}", "q1")

    tg_say(ALICE_TG, reason)

    rejected = Approval.objects.get(pk=approval.pk)
    assert rejected.status == Approval.Status.REJECTED
    assert "\x00" not in rejected.rejection_reason and "\ud800" not in rejected.rejection_reason and len(rejected.rejection_reason) <= 2000


# --- Slack: signed presses and submissions through what may not decide ------------------------------

ALICE_SLACK, BOB_SLACK = "UALICE", "UBOB"


@pytest.fixture
def slack(settings):
    from tests.standins.fake_slack import FakeSlack, django_poster

    with FakeSlack(poster=django_poster(Client())) as fake:
        settings.SLACK_BOT_TOKEN, settings.SLACK_SIGNING_SECRET, settings.SLACK_API_BASE_URL = fake.token, fake.signing_secret, fake.url
        yield fake


def slack_link(fake, user, slack_id: str) -> None:
    from slacklink import accounts

    assert fake.command(slack_id, f"link {accounts.issue_code(user)}")[0] == 200


def slack_version(approval: Approval, user):
    from slacklink.models import SentVersion

    return SentVersion.objects.filter(message__approval=approval, message__account__user=user).latest("pk")


def slack_act(fake, slack_id: str, action_id: str, value: str) -> str:
    """A signed press of any button: what someone who read the message and holds the app's payload shape sends."""
    message = {"ts": "1.1", "channel": "D0"}
    assert fake.act(slack_id, message, {"type": "button", "action_id": action_id, "block_id": "decide", "value": value})[0] == 200
    return fake.ephemerals(slack_id)[-1] if fake.ephemerals(slack_id) else ""


def test_a_signed_approve_press_on_a_sentence_only_slack_message_is_refused(slack, alice, agent, settings):
    from slacklink import blocks

    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = ["medium"]
    slack_link(slack, alice, ALICE_SLACK)
    approval = one(alice, agent)
    version = slack_version(approval, alice)
    assert not version.complete

    said = slack_act(slack, ALICE_SLACK, blocks.APPROVE, version.token)

    assert said.startswith("This message showed the call cut")
    unchanged(approval)


def test_a_slack_extend_press_by_a_decider_who_lost_the_right_extends_nothing(slack, alice, bob, ops_agent):
    from django.contrib.auth.models import Permission

    from slacklink import blocks

    slack_link(slack, bob, BOB_SLACK)
    approval = with_deadline(one(alice, ops_agent, "delete a.txt"))  # four eyes: bob's copy
    bobs = slack_version(approval, bob)
    bob.user_permissions.remove(Permission.objects.get(codename="decide_approval"))

    slack_act(slack, BOB_SLACK, blocks.EXTEND, bobs.token)

    assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_a_slack_extend_press_after_the_deadline_extends_nothing(slack, alice, agent):
    from slacklink import blocks

    slack_link(slack, alice, ALICE_SLACK)
    approval = with_deadline(one(alice, agent))
    version = slack_version(approval, alice)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    said = slack_act(slack, ALICE_SLACK, blocks.EXTEND, version.token)

    assert said.lower().startswith("too late") and Approval.objects.get(pk=approval.pk).extended_at is None


@pytest.mark.parametrize("reason", ["no\x00pe", "no\ud800pe", "x" * 50_000], ids=["nul", "surrogate", "oversized"])
def test_a_slack_reason_no_database_stores_as_is_still_rejects(slack, alice, agent, reason):
    from slacklink import blocks

    slack_link(slack, alice, ALICE_SLACK)
    approval = one(alice, agent)
    version = slack_version(approval, alice)
    view = {"callback_id": blocks.REASON_VIEW, "private_metadata": version.token}

    status, _ = slack.submit(ALICE_SLACK, view, {"reason": reason})

    rejected = Approval.objects.get(pk=approval.pk)
    assert status == 200 and rejected.status == Approval.Status.REJECTED
    assert "\x00" not in rejected.rejection_reason and "\ud800" not in rejected.rejection_reason and len(rejected.rejection_reason) <= 5000


# --- Extend and ask again through the API ------------------------------------------------------------


def test_api_extend_and_ask_again_refuse_the_late_the_stranger_the_second_and_the_mcp_call(alice, mallory, agent, api_as):
    from chat.models import Conversation

    overdue = with_deadline(one(alice, agent))
    Approval.objects.filter(pk=overdue.pk).update(expires_at=timezone.now() - timedelta(seconds=1))  # the sweep has not run
    late = api_as(alice).post(f"approvals/{overdue.pk}/extend")
    assert late.status_code == 409 and "expired" in late.json()["detail"]
    assert Approval.objects.get(pk=overdue.pk).extended_at is None

    assert api_as(mallory).post(f"approvals/{overdue.pk}/ask-again").status_code == 404
    assert api_as(mallory).post(f"approvals/{overdue.pk}/extend").status_code == 404
    assert api_as(alice).post(f"approvals/{overdue.pk}/ask-again").status_code == 201
    assert api_as(alice).post(f"approvals/{overdue.pk}/ask-again").status_code == 409

    by_mcp = with_deadline(one(alice, agent, "write bye to b.txt"))
    Conversation.objects.filter(pk=by_mcp.conversation_id).update(source=Conversation.Source.MCP)
    Approval.objects.filter(pk=by_mcp.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api_as(alice).post(f"approvals/{by_mcp.pk}/ask-again").status_code == 409
    assert not Approval.objects.filter(asked_again_from=by_mcp).exists()


# --- Tokens in what is logged, mailed or shown ------------------------------------------------------


def test_a_token_in_a_query_a_referer_or_a_404_path_is_masked_in_the_log_lines(alice, agent, caplog):
    approval = one(alice, agent)
    value = tokens.issue(approval, alice, channel="push")
    email_value = tokens.issue(approval, alice, channel="email")
    browser = Client(enforce_csrf_checks=True)

    with caplog.at_level(logging.INFO):
        browser.get(f"/push/decide/{value}", HTTP_REFERER=f"https://hitl.example.org/approve/{email_value}/")
        browser.get(f"/no/such/page/?token={value}")
        browser.post(f"/approve/{email_value}/?token={value}", {"decision": "approve"}, HTTP_REFERER=f"https://x/?t={email_value}")
        browser.post(f"/push/reject/?token={value.replace(':', '%3A')}", {"token": value})

    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "Not Found" in logged and "Forbidden" in logged  # the lines were written
    for secret in (value, email_value, value.replace(":", "%3A")):
        assert secret not in logged
    unchanged(approval, value, email_value)


def test_the_error_mail_to_admins_never_holds_a_token(alice, agent, settings, monkeypatch):
    from django.core import mail

    from emaillink import views as email_views

    settings.ADMINS = [("ops", "ops@example.org")]
    settings.DEBUG = False
    approval = one(alice, agent)
    value = tokens.issue(approval, alice, channel="email")

    def failing(token):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(email_views.tokens, "open_token", failing)
    response = Client(raise_request_exception=False).get(f"/approve/{value}/?again={value}", HTTP_REFERER=f"https://x/approve/{value}/")

    assert response.status_code == 500 and value not in response.content.decode()
    assert mail.outbox, "the error was mailed to the admins"
    for sent in mail.outbox:
        assert value not in sent.subject and value not in sent.body
        assert all(value not in str(content) for content, _ in sent.alternatives)


def test_json_nested_past_the_parsers_depth_in_a_signed_slack_payload_or_a_telegram_update_is_a_400(slack, telegram, alice, agent):
    from urllib.parse import urlencode

    from telegramlink.views import SECRET_HEADER, webhook_secret

    approval = one(alice, agent)
    deep = "[" * 5000

    status, _ = slack.deliver("/slack/interactions/", urlencode({"payload": deep}))
    assert status == 400
    response = Client().post(
        f"/telegram/webhook/{webhook_secret('path')}/", deep, content_type="application/json", headers={SECRET_HEADER: webhook_secret("header")}
    )
    assert response.status_code == 400
    unchanged(approval)


def test_a_token_whose_holder_may_no_longer_see_the_call_reveals_nothing_of_it(alice, bob, ops_agent):
    from django.contrib.auth.models import Permission

    approval = one(alice, ops_agent, "delete a.txt")
    push_token = tokens.issue(approval, bob, channel="push", complete=False)
    email_token = tokens.issue(approval, bob, channel="email")
    bob.user_permissions.remove(Permission.objects.get(codename="decide_approval"))

    status, body = push("/push/reject/call", {"token": push_token})
    page = Client().get(f"/approve/{email_token}/")

    assert "a.txt" not in json.dumps(body) and status == 403
    assert page.status_code == 403 and "a.txt" not in page.content.decode()
    unchanged(approval, push_token, email_token)


@pytest.mark.parametrize("segment", ["%00", "%ED%A0%80", "a" * 20_000, "e30:1:x", "..%2F..%2Fadmin"])
def test_an_email_link_whose_token_is_garbage_is_a_4xx_on_get_and_post(alice, agent, segment):
    approval = one(alice, agent)

    assert Client().get(f"/approve/{segment}/").status_code in (403, 404)  # a "/" in it: no such route
    assert email_post(segment, "approve").status_code in (403, 404)
    unchanged(approval)
