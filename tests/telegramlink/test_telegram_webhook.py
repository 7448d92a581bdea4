"""How updates reach the bot: the poller, which waits out an unreachable Bot API, and the webhook, which
handles an update only at its secret path with its secret header, by POST, while the bot is on."""
import io
import json
import threading

import pytest
from django.core.management import call_command
from django.test import Client

from approvals.models import Approval
from telegramlink import accounts
from telegramlink.models import LinkCode, TelegramAccount
from telegramlink.views import SECRET_HEADER, webhook_secret
from bench.stack import free_port
from tests.conftest import wait_until
from tests.standins.fake_telegram import FakeTelegram
from tests.telegramlink.phone import ALICE_TG, message_update, press_update, replies, through_the_loop

pytestmark = pytest.mark.django_db


@through_the_loop
def test_the_poller_waits_out_an_unreachable_bot_api_then_polls(alice, settings, caplog):
    """`make run` starts the poller with the others; exiting while the Bot API is down would take
    the whole stack down (honcho). It logs one line a failure, waits longer each time, then polls."""
    port = free_port()
    settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = "4242:test-token", f"http://127.0.0.1:{port}"
    code = accounts.issue_code(alice)
    failures = lambda: [r.getMessage() for r in caplog.records if "failed, again in" in r.getMessage()]  # noqa: E731
    up = []

    def bring_the_bot_api_up():
        try:
            wait_until(lambda: len(failures()) >= 2, timeout=30, message="two failed tries")
        finally:  # whatever happens, the poller below ends
            up.append(FakeTelegram(port=port).__enter__())
            up[0].say(ALICE_TG, f"/start {code}")

    thread = threading.Thread(target=bring_the_bot_api_up, daemon=True)
    thread.start()
    out = io.StringIO()
    try:
        call_command("telegram_poll", once=True, stdout=out)  # --once: back after one batch of updates
    finally:
        thread.join(10)
        if up:
            up[0].__exit__()

    assert TelegramAccount.objects.get(user=alice).telegram_user_id == ALICE_TG
    assert "Polling Telegram for updates." in out.getvalue()
    logged = failures()
    assert len(logged) >= 2 and "again in 1 s" in logged[0] and "again in 2 s" in logged[1], logged


def webhook(body, *, path_secret: str | None = None, header: str | None = None, content_type="application/json"):
    headers = {SECRET_HEADER: header} if header is not None else {}
    data = json.dumps(body) if not isinstance(body, (str, bytes)) else body
    return Client().post(f"/telegram/webhook/{path_secret or webhook_secret('path')}/", data,
                         content_type=content_type, headers=headers)


def test_the_webhook_with_both_secrets_handles_the_update(fake, alice):
    code = accounts.issue_code(alice)

    response = webhook(message_update(ALICE_TG, f"/start {code}"), header=webhook_secret("header"))

    assert response.status_code == 200 and response.json() == {"ok": True}
    assert TelegramAccount.objects.get(user=alice).telegram_user_id == ALICE_TG
    assert replies(fake, ALICE_TG)[-1].startswith("Linked to alice.")


def test_the_webhook_at_a_wrong_path_is_not_found(fake, alice):
    code = accounts.issue_code(alice)

    response = webhook(message_update(ALICE_TG, f"/start {code}"), path_secret="wrong", header=webhook_secret("header"))

    assert response.status_code == 404
    assert not TelegramAccount.objects.exists()


def test_the_webhook_at_a_non_ascii_path_is_not_found(fake):
    """(FAILS: views.webhook compares the path with hmac.compare_digest, which raises TypeError for
    a str with non-ASCII characters, so this answers 500 rather than 404.)"""
    client = Client(raise_request_exception=False)

    response = client.post("/telegram/webhook/%C3%A9t%C3%A9/", "{}", content_type="application/json",
                           headers={SECRET_HEADER: webhook_secret("header")})

    assert response.status_code == 404


def test_the_webhook_without_the_right_secret_header_is_forbidden(fake, alice):
    code = accounts.issue_code(alice)

    for header in (None, "", "wrong", webhook_secret("path"), webhook_secret("header")[:-1]):
        response = webhook(message_update(ALICE_TG, f"/start {code}"), header=header)
        assert response.status_code == 403, header

    assert not TelegramAccount.objects.exists()
    assert LinkCode.objects.get(user=alice).used_at is None


def test_the_webhook_with_a_non_ascii_secret_header_is_forbidden(fake):
    """(FAILS like the non-ASCII path: hmac.compare_digest raises TypeError, a 500 rather than a 403.)"""
    client = Client(raise_request_exception=False)

    response = client.post(f"/telegram/webhook/{webhook_secret('path')}/", "{}", content_type="application/json",
                           headers={SECRET_HEADER: "sécret"})

    assert response.status_code == 403


def test_the_webhook_answers_400_to_a_body_that_is_not_json(fake):
    for body in ("not json", b"\xff\xfe\x00", "{", ""):
        response = webhook(body, header=webhook_secret("header"))
        assert response.status_code == 400 and response.json() == {"detail": "The body is not JSON."}, body


def test_the_webhook_takes_json_that_is_no_update_and_does_nothing(fake):
    for body in ([], 3, "null", {"message": "x"}, {"callback_query": {"id": 5}}, {"update_id": 9}):
        response = webhook(body, header=webhook_secret("header"))
        assert response.status_code == 200, body
    assert not [name for name, _ in fake.calls if name != "getMe"]


def test_the_webhook_is_not_found_when_the_bot_is_off(fake, alice, settings):
    path, header = webhook_secret("path"), webhook_secret("header")
    code = accounts.issue_code(alice)
    settings.TELEGRAM_BOT_TOKEN = ""

    response = webhook(message_update(ALICE_TG, f"/start {code}"), path_secret=path, header=header)

    assert response.status_code == 404
    assert not TelegramAccount.objects.exists()


def test_the_webhook_secrets_change_with_the_bot_token(fake, settings):
    before = webhook_secret("path"), webhook_secret("header")
    assert before[0] != before[1] and len(before[0]) == 48

    settings.TELEGRAM_BOT_TOKEN = "4242:another-token"

    assert (webhook_secret("path"), webhook_secret("header")) != before


def test_the_webhook_takes_only_post(fake):
    response = Client().get(f"/telegram/webhook/{webhook_secret('path')}/", headers={SECRET_HEADER: webhook_secret("header")})

    assert response.status_code == 405


@through_the_loop
def test_a_press_through_the_webhook_decides(pending, fake, alice):
    approval, buttons = pending

    plain_reject = buttons["Reject"].replace("R:", "r:")  # the "Reject without a reason" under the prompt
    response = webhook(press_update(ALICE_TG, plain_reject, query_id="web-1"), header=webhook_secret("header"))

    assert response.status_code == 200
    assert fake.answer_to("web-1") == "Rejected."
    assert Approval.objects.get(pk=approval.pk).status == "rejected"
