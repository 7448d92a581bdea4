"""Linking a Slack account (slacklink): `/hitl link <code>` links the Slack user who sends it once, an
expired or replaced code links nothing, unlink and usage, the link-code command, and the profile page
that gives a code and unlinks."""
import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from slacklink import accounts
from slacklink.models import LinkCode, SlackAccount
from tests.conftest import client_for
from tests.slacklink.workspace import ALICE, STRANGER, link
from tests.standins.fake_slack import TEAM

pytestmark = pytest.mark.django_db


def answer(response: tuple[int, str]) -> str:
    status, body = response
    assert status == 200, body
    return json.loads(body)["text"]


def test_a_link_code_links_the_slack_user_who_sends_it_once(fake, alice):
    code = accounts.issue_code(alice)

    assert answer(fake.command(ALICE, f"link {code.lower()}", username="alice.s")).startswith("Linked to alice.")

    account = SlackAccount.objects.get(user=alice)
    assert (account.team_id, account.slack_user_id, account.slack_username) == (TEAM, ALICE, "alice.s")
    assert "unknown, used or expired" in answer(fake.command(STRANGER, f"link {code}"))
    assert list(SlackAccount.objects.values_list("slack_user_id", flat=True)) == [ALICE]


def test_an_expired_or_replaced_code_links_nothing(fake, alice):
    older = accounts.issue_code(alice)
    code = accounts.issue_code(alice)
    assert "unknown, used or expired" in answer(fake.command(ALICE, f"link {older}"))
    LinkCode.objects.filter(user=alice, used_at__isnull=True).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert "unknown, used or expired" in answer(fake.command(ALICE, f"link {code}"))
    assert not SlackAccount.objects.exists()


def test_unlink_and_usage(fake, alice):
    link(fake, alice, ALICE)
    assert answer(fake.command(ALICE, "unlink")) == "Unlinked from alice."
    assert not SlackAccount.objects.exists()
    assert answer(fake.command(ALICE, "unlink")) == "This Slack account is not linked."
    assert answer(fake.command(ALICE, "")) == answer(fake.command(ALICE, "link")) == answer(fake.command(ALICE, "hello"))


def test_the_same_slack_user_in_another_team_is_another_person(fake, alice, bob):
    link(fake, alice, ALICE)
    fake.command(ALICE, f"link {accounts.issue_code(bob)}", team="T0OTHER")
    assert sorted(SlackAccount.objects.values_list("user__username", "team_id")) == [("alice", TEAM), ("bob", "T0OTHER")]


def test_the_link_code_command_prints_the_code_as_its_last_word(fake, alice):
    out = io.StringIO()
    call_command("slack_link_code", "alice", stdout=out)

    answer(fake.command(ALICE, f"link {out.getvalue().split()[-1]}"))

    assert SlackAccount.objects.get(user=alice).slack_user_id == ALICE
    with pytest.raises(CommandError, match="No active user 'nobody'"):
        call_command("slack_link_code", "nobody", stdout=io.StringIO())


def test_the_profile_page_gives_a_code_that_links_and_unlinks(fake, alice):
    page = client_for(alice).get("/profile/").content.decode()
    assert 'id="slack"' in page and "Get a Slack link code" in page

    shown = client_for(alice).post("/slack/code/").content.decode()
    code = shown.split('id="slack-code">/hitl link ')[1].split("<")[0]
    answer(fake.command(ALICE, f"link {code}"))
    assert "slack-linked" in client_for(alice).get("/profile/").content.decode()

    assert client_for(alice).post("/slack/unlink/").status_code == 302
    assert not SlackAccount.objects.exists()


def test_the_profile_forms_need_a_login_and_a_csrf_token(fake, alice):
    assert Client().post("/slack/code/").status_code == 302
    assert client_for(alice, csrf=True).post("/slack/code/").status_code == 403
    assert not LinkCode.objects.exists()


def test_the_profile_section_says_when_slack_is_not_set_up(alice, settings):
    settings.SLACK_BOT_TOKEN = ""
    assert "Slack is not set up on this site" in client_for(alice).get("/profile/").content.decode()
    assert client_for(alice).post("/slack/code/").status_code == 404
