"""Linking a Telegram account (telegramlink): a one-time code sent with /start links the account
that sends it once, expires and is voided by a newer one; /stop unlinks; the link-code command; the
Telegram page, which gives a code and unlinks."""
import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from deliveries.models import CODE_ALPHABET, CODE_LENGTH
from telegramlink import accounts
from telegramlink.models import LinkCode, TelegramAccount
from tests.conftest import client_for
from tests.telegramlink.phone import ALICE_TG, BOB_TG, STRANGER_TG, link, press, replies, say

pytestmark = pytest.mark.django_db


def test_a_link_code_links_the_telegram_account_that_sends_it_once(fake, alice):
    code = accounts.issue_code(alice)

    say(ALICE_TG, f"/start {code.lower()}")  # typed on a phone: case does not matter

    account = TelegramAccount.objects.get(user=alice)
    assert (account.telegram_user_id, account.chat_id, account.telegram_username) == (ALICE_TG, ALICE_TG, f"user{ALICE_TG}")
    assert replies(fake, ALICE_TG)[-1].startswith("Linked to alice.")
    assert LinkCode.objects.get(user=alice).used_at is not None

    say(STRANGER_TG, f"/start {code}")

    assert "unknown, used or expired" in replies(fake, STRANGER_TG)[-1]
    assert list(TelegramAccount.objects.values_list("user__username", "telegram_user_id")) == [("alice", ALICE_TG)]
    with pytest.raises(accounts.LinkRefused):
        accounts.link(code, telegram_user_id=STRANGER_TG, chat_id=STRANGER_TG)


def test_an_expired_link_code_is_refused(fake, alice):
    code = accounts.issue_code(alice)
    LinkCode.objects.filter(user=alice).update(expires_at=timezone.now() - timedelta(seconds=1))

    say(ALICE_TG, f"/start {code}")

    assert "unknown, used or expired" in replies(fake, ALICE_TG)[-1]
    assert not TelegramAccount.objects.exists()


def test_a_code_is_valid_for_the_configured_minutes(fake, alice, settings):
    settings.HITL_TELEGRAM_CODE_MINUTES = 3
    before = timezone.now()
    accounts.issue_code(alice)
    expires = LinkCode.objects.get(user=alice).expires_at
    assert before + timedelta(minutes=3) <= expires <= timezone.now() + timedelta(minutes=3)


def test_a_newer_code_voids_the_older_one(fake, alice):
    older = accounts.issue_code(alice)
    newer = accounts.issue_code(alice)
    assert older != newer

    say(ALICE_TG, f"/start {older}")
    assert not TelegramAccount.objects.exists()
    assert "unknown, used or expired" in replies(fake, ALICE_TG)[-1]

    say(ALICE_TG, f"/start {newer}")
    assert TelegramAccount.objects.get(user=alice).telegram_user_id == ALICE_TG


def test_a_code_of_a_user_deactivated_since_links_nothing(fake, alice):
    code = accounts.issue_code(alice)
    User.objects.filter(pk=alice.pk).update(is_active=False)

    say(ALICE_TG, f"/start {code}")

    assert not TelegramAccount.objects.exists()


def test_linking_a_telegram_id_already_linked_to_another_user_moves_it(fake, alice, bob):
    link(alice, ALICE_TG)

    link(bob, ALICE_TG)  # the same phone, now for bob

    assert list(TelegramAccount.objects.values_list("user__username", "telegram_user_id")) == [("bob", ALICE_TG)]


def test_linking_again_replaces_the_users_telegram_account_and_forgets_what_it_awaited(fake, alice):
    account = link(alice, ALICE_TG)
    TelegramAccount.objects.filter(pk=account.pk).update(awaiting=TelegramAccount.Awaiting.REASON)

    link(alice, BOB_TG)

    account = TelegramAccount.objects.get(user=alice)
    assert (account.telegram_user_id, account.chat_id, account.awaiting) == (BOB_TG, BOB_TG, "")
    assert TelegramAccount.objects.count() == 1


def test_stop_unlinks_and_start_without_a_code_says_how_to_link(fake, alice):
    link(alice, ALICE_TG)

    say(ALICE_TG, "/stop")
    assert not TelegramAccount.objects.exists()
    assert replies(fake, ALICE_TG)[-1] == "Unlinked from alice."

    say(ALICE_TG, "/stop")
    assert "not linked" in replies(fake, ALICE_TG)[-1]
    say(ALICE_TG, "/start")
    assert replies(fake, ALICE_TG)[-1].startswith("Send /start followed by the code")
    say(ALICE_TG, "hello")
    assert "not linked" in replies(fake, ALICE_TG)[-1]


def test_the_link_code_command_prints_the_code_as_its_last_word(fake, alice):
    out = io.StringIO()
    call_command("telegram_link_code", "alice", stdout=out)
    code = out.getvalue().split()[-1]
    assert len(code) == CODE_LENGTH and set(code) <= set(CODE_ALPHABET)

    say(ALICE_TG, f"/start@hitl_test_bot {code}")

    assert TelegramAccount.objects.get(user=alice).telegram_user_id == ALICE_TG


def test_the_link_code_command_refuses_an_unknown_or_inactive_user(fake, alice):
    with pytest.raises(CommandError, match="No active user 'nobody'"):
        call_command("telegram_link_code", "nobody", stdout=io.StringIO())
    User.objects.filter(pk=alice.pk).update(is_active=False)
    with pytest.raises(CommandError, match="No active user 'alice'"):
        call_command("telegram_link_code", "alice", stdout=io.StringIO())
    assert not LinkCode.objects.exists()


def test_the_telegram_page_needs_a_login(fake, alice):
    for response in (Client().get("/telegram/"), Client().post("/telegram/code/"), Client().post("/telegram/unlink/")):
        assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    assert not LinkCode.objects.exists()


def test_get_a_link_code_shows_a_code_that_links(fake, alice):
    client = client_for(alice, csrf=True)
    page = client.get("/telegram/")
    assert page.status_code == 200 and 'id="telegram-not-linked"' in page.content.decode()
    token = page.cookies["csrftoken"].value if "csrftoken" in page.cookies else client.cookies["csrftoken"].value

    response = client.post("/telegram/code/", {"csrfmiddlewaretoken": token})

    assert response.status_code == 200
    html = response.content.decode()
    code = html.split('<code id="telegram-code">/start ', 1)[1].split("<", 1)[0]
    assert len(code) == CODE_LENGTH
    say(ALICE_TG, f"/start {code}")
    assert TelegramAccount.objects.get(user=alice).telegram_user_id == ALICE_TG
    linked = client.get("/telegram/").content.decode()
    assert f"Linked to Telegram account {ALICE_TG} (@user{ALICE_TG})" in linked


def test_a_post_without_a_csrf_token_is_forbidden(fake, alice):
    link(alice, ALICE_TG)
    client = client_for(alice, csrf=True)

    assert client.post("/telegram/code/").status_code == 403
    assert client.post("/telegram/unlink/").status_code == 403

    assert LinkCode.objects.filter(used_at__isnull=True).count() == 0
    assert TelegramAccount.objects.filter(user=alice).exists()


def test_unlink_removes_the_telegram_account(fake, alice, bob):
    link(alice, ALICE_TG)
    link(bob, BOB_TG)
    client = client_for(alice, csrf=True)
    client.get("/telegram/")

    response = client.post("/telegram/unlink/", {"csrfmiddlewaretoken": client.cookies["csrftoken"].value})

    assert response.status_code == 302 and response.url == "/telegram/"
    assert list(TelegramAccount.objects.values_list("user__username", flat=True)) == ["bob"]
    assert "not linked" in press(fake, ALICE_TG, "a:whatever")


def test_the_page_without_a_bot_says_so_and_gives_no_code(alice, settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    client = client_for(alice)

    assert 'id="telegram-off"' in client.get("/telegram/").content.decode()
    assert client.post("/telegram/code/").status_code == 404
    assert not LinkCode.objects.exists()
