"""Slack as one more surface of the decision service (slacklink), in process: linking with
`/hitl link <code>`, the signed endpoints (forged, stale, replayed and garbage requests refused),
what a request shows (Block Kit, escaped, cut, its buttons), who gets it, presses and modals
deciding through approvals.services via "slack", every copy following the outcome, and the outbox
(queued, sent, failed, resent, closed). The Slack Web API is tests/standins/fake_slack.py, reached through
slack_sdk's WebClient; presses are signed and posted to the site as Slack posts them."""
import io
import json
import re
import time
import uuid
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from approvals.deciders import escalation, routemaking
from approvals import services as approval_services
from approvals.models import Approval
from approvals.summary import summarize
from approvals.signals import approval_requested
from deliveries import outbox
from deliveries.tasks import send_later, sweep_channel
from slacklink import accounts, blocks, verification
from slacklink.channel import CHANNEL
from slacklink.models import LinkCode, Reminder, SeenRequest, SentVersion, SlackAccount, SlackMessage
from tests.conftest import client_for, only_pending, start_conversation
from tests.standins.fake_slack import TEAM, FakeSlack, django_poster, dm, sign

pytestmark = pytest.mark.django_db
through_the_loop = pytest.mark.django_db(transaction=True)  # the signals that send are sent on commit

ALICE, BOB, CAROL, MALLORY, DANA, ERIN, STRANGER = "UALICE", "UBOB", "UCAROL", "UMALLORY", "UDANA", "UERIN", "USTRANGER"


@pytest.fixture
def fake(settings):
    with FakeSlack(poster=django_poster(Client())) as slack:
        settings.SLACK_BOT_TOKEN = slack.token
        settings.SLACK_SIGNING_SECRET = slack.signing_secret
        settings.SLACK_API_BASE_URL = slack.url
        yield slack


def link(fake, user, slack_id: str) -> SlackAccount:
    status, body = fake.command(slack_id, f"link {accounts.issue_code(user)}")
    assert status == 200, body
    return SlackAccount.objects.get(user=user, slack_user_id=slack_id)


def answer(response: tuple[int, str]) -> str:
    status, body = response
    assert status == 200, body
    return json.loads(body)["text"]


def shows(fake, message: dict, approval: Approval) -> bool:
    return re.search(rf"Request #{approval.pk}\b", fake.text_of(message)) is not None


def request_to(fake, slack_id: str, approval: Approval) -> dict | None:
    """The message that shows `approval` in `slack_id`'s messages with the app, as it is now."""
    return next((m for m in fake.messages_to(slack_id) if shows(fake, m, approval)), None)


def queued_unsent(settings, user, agent, text: str) -> tuple[Approval, SlackMessage]:
    """An approval requested while Slack was off, then queued by hand: its message not yet sent."""
    token = settings.SLACK_BOT_TOKEN
    settings.SLACK_BOT_TOKEN = ""
    approval = only_pending(start_conversation(user, agent, text))
    settings.SLACK_BOT_TOKEN = token
    (message_id,) = CHANNEL.queue(approval)
    return approval, SlackMessage.objects.get(pk=message_id)


def send(row) -> str:
    """One send of a queued message or reply, as its task makes it."""
    return outbox.send(CHANNEL, type(row), row.pk)


def stale_rows(settings) -> tuple[list, list[int], list[int]]:
    """(rows to send again, messages to close again, to rewrite again), as the sweep finds them once stale."""
    settings.HITL_SLACK_STALE_SECONDS = 0
    found = outbox.lost(CHANNEL, now=timezone.now() + timedelta(seconds=1))
    return found.to_send, found.to_close, found.to_rewrite


def sweep() -> None:
    """Slack's part of the beat sweep, once what a check of `outbox.lost()` stamped has aged."""
    SlackMessage.objects.update(updated_at=timezone.now() - timedelta(hours=1))
    Reminder.objects.update(updated_at=timezone.now() - timedelta(hours=1))
    sweep_channel(CHANNEL)


# --- Linking -------------------------------------------------------------------------------------


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


# --- The signed endpoints, attacked ---------------------------------------------------------------


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


# --- What a request shows -------------------------------------------------------------------------


@pytest.fixture
def pending(fake, alice, agent):
    """alice linked, with one pending write_file approval whose request reached her messages."""
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    message = request_to(fake, ALICE, approval)
    assert message is not None
    return approval, message


@through_the_loop
def test_a_request_reads_as_the_summary_sentence_and_who_asked_then_why_and_the_whole_details(pending, fake):
    approval, message = pending
    summary = summarize(Approval.objects.get(pk=approval.pk))
    text = fake.text_of(message)
    assert text.startswith("Approve? Write a.txt") and "— asked by alice (Demo agent)" in text.splitlines()[0]
    assert summary.head in text and f"Why: {summary.why}" in text and summary.why != "write_file"
    assert f"Risk: {approval.risk}" in text and summary.arguments in text and "Cut" not in text
    assert list(fake.buttons(message)) == ["Approve", "Reject", "Open on the site"]
    assert fake.buttons(message)["Open on the site"]["url"].endswith(f"#tool-call-{approval.tool_call_id}")
    (post,) = fake.sent("chat.postMessage", channel=ALICE)
    assert post["text"] == summary.head  # the notification a person reads in one second
    values = {b["value"] for label, b in fake.buttons(message).items() if label != "Open on the site"}
    (version,) = SentVersion.objects.filter(message__approval=approval)
    assert values == {version.token} and "a.txt" not in version.token and version.complete


@through_the_loop
def test_markup_mentions_and_invisible_characters_in_arguments_are_shown_literally(fake, alice, agent):
    link(fake, alice, ALICE)
    content = "<!channel> *bold* <https://evil.test|click> \u202egnp.exe & done"
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'x.txt', 'content': content})}"))
    message = request_to(fake, ALICE, approval)
    detail = next(b for b in message["blocks"] if b["type"] == "rich_text")
    shown = detail["elements"][0]["elements"][0]["text"]
    assert "⟨U+202E⟩" in shown and "\u202e" not in json.dumps(message, ensure_ascii=False)
    assert "<!channel>" in shown  # literal: preformatted rich text neither mentions nor links
    assert all(b["type"] != "section" or b.get("text", {"type": "plain_text"})["type"] == "plain_text" for b in message["blocks"])
    (post,) = fake.sent("chat.postMessage", channel=ALICE)
    assert "<" not in post["text"] and ">" not in post["text"]


@through_the_loop
def test_a_call_too_long_for_slack_is_cut_with_a_link_and_can_only_be_rejected_there(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'x.txt', 'content': 'y' * 9000})}"))
    message = request_to(fake, ALICE, approval)
    assert message is not None  # the stand-in refuses a block past 3,000 characters, as Slack does
    assert blocks.CUT in fake.text_of(message) and "Cut: the call is too long for Slack" in fake.text_of(message)
    assert list(fake.buttons(message)) == ["Reject", "Open on the site"]
    assert not SentVersion.objects.get(message__approval=approval).complete


@through_the_loop
def test_a_call_decided_at_once_by_a_rule_is_not_sent(fake, alice, agent, api_as):
    link(fake, alice, ALICE)
    response = api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})
    assert response.status_code in (200, 201), response.content
    start_conversation(alice, agent, "write hello to a.txt")
    assert not SlackMessage.objects.exists()


# --- Deciding ---------------------------------------------------------------------------------------


@through_the_loop
def test_an_approve_press_decides_as_the_linked_user_via_slack_and_updates_the_message(pending, fake, alice):
    approval, message = pending

    assert fake.press(ALICE, message, "Approve")[0] == 200

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "slack")
    row = SlackMessage.objects.get(approval=approval)
    assert row.status == "closed"
    now = request_to(fake, ALICE, approval)
    assert (now["ts"], now["channel"]) == (row.ts, row.channel) == (message["ts"], dm(ALICE))
    assert f"Approved by alice via slack at {approval.decided_at:%H:%M}" in fake.text_of(now)
    assert fake.buttons(now) == {}


@through_the_loop
def test_reject_always_opens_a_modal_asking_why_whose_reason_rejects(pending, fake, alice):
    approval, message = pending

    fake.press(ALICE, message, "Reject")

    (view,) = fake.views()
    assert view["callback_id"] == blocks.REASON_VIEW and Approval.objects.get(pk=approval.pk).status == "pending"
    assert "Why reject it?" in json.dumps(view) and "Write a.txt" in json.dumps(view)
    assert fake.submit(ALICE, view, {"reason": "  Legal has <not> signed off "}) == (200, "")
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "Legal has <not> signed off", "slack")
    assert "Rejected by alice via slack" in fake.text_of(request_to(fake, ALICE, approval))
    assert "Legal has <not> signed off" in fake.text_of(request_to(fake, ALICE, approval))


@through_the_loop
def test_a_late_press_is_told_who_decided_first_in_an_ephemeral(pending, fake, alice):
    approval, message = pending
    approval_services.decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")
    assert "Rejected by alice via api" in fake.text_of(request_to(fake, ALICE, approval))

    fake.press(ALICE, message, "Approve")

    assert fake.ephemerals(ALICE)[-1].startswith("too late: rejected by alice via api at ")
    assert fake.ephemerals(ALICE)[-1].endswith(": not now")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


@through_the_loop
def test_a_late_modal_submission_shows_who_decided_first_in_the_modal(pending, fake, alice):
    approval, message = pending
    fake.press(ALICE, message, "Reject")
    approval_services.decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)

    status, body = fake.submit(ALICE, fake.views()[-1], {"reason": "no"})

    assert status == 200 and json.loads(body)["errors"]["reason"].startswith("too late: approved by alice via api")
    assert Approval.objects.get(pk=approval.pk).status == "approved"


@through_the_loop
def test_presses_from_someone_unlinked_or_not_allowed_or_on_anothers_copy_decide_nothing(pending, fake, alice, mallory):
    approval, message = pending
    fake.press(STRANGER, message, "Approve")
    assert "not linked" in fake.ephemerals(STRANGER)[-1]
    link(fake, mallory, MALLORY)
    fake.press(MALLORY, message, "Approve")  # alice's button, pressed by mallory
    assert fake.ephemerals(MALLORY)[-1] == "This request is no longer known."
    fake.press(ALICE, message, "Approve", team="T0OTHER")  # the same user id in another workspace
    assert "not linked" in fake.ephemerals(ALICE)[-1]
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_critical_call_opens_a_modal_for_its_confirmation(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    message = request_to(fake, ALICE, approval)
    assert "Critical: approving it needs the confirmation DELETE" in fake.text_of(message)

    fake.press(ALICE, message, "Approve (type the confirmation)")

    assert Approval.objects.get(pk=approval.pk).status == "pending"  # one press approves nothing
    (view,) = fake.views()
    assert view["callback_id"] == blocks.CONFIRM_VIEW and "DELETE" in json.dumps(view)
    status, body = fake.submit(ALICE, view, {"confirmation": "delete"})
    assert status == 200 and json.loads(body)["errors"]["confirmation"].startswith("That is not it")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert fake.submit(ALICE, view, {"confirmation": "DELETE"}) == (200, "")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "slack")


@through_the_loop
def test_question_options_are_buttons_and_a_press_answers(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "ask me to choose between tea, coffee and water"))
    message = request_to(fake, ALICE, approval)
    assert list(fake.buttons(message))[:3] == ["tea", "coffee", "water"]
    assert "Reject (decline to answer)" in fake.buttons(message)

    fake.press(ALICE, message, "coffee")

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_via) == ("answered", "coffee", "slack")
    assert "Answered by alice via slack" in fake.text_of(request_to(fake, ALICE, approval))


@through_the_loop
def test_many_options_become_a_select(fake, alice, agent):
    link(fake, alice, ALICE)
    options = ["red", "orange", "yellow", "green", "blue", "indigo", "violet"]
    ask = json.dumps({"question": "Which colour?", "type": "choice", "options": options})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {ask}"))
    message = request_to(fake, ALICE, approval)
    assert len(fake.select(message)["options"]) == 7

    fake.choose(ALICE, message, "6.")

    assert Approval.objects.get(pk=approval.pk).answer == "indigo"


@through_the_loop
def test_a_text_question_is_answered_in_a_modal(fake, alice, agent):
    link(fake, alice, ALICE)
    ask = json.dumps({"question": "How many?", "type": "number", "min": 1, "max": 5})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {ask}"))
    fake.press(ALICE, request_to(fake, ALICE, approval), "Answer…")
    view = fake.views()[-1]

    status, body = fake.submit(ALICE, view, {"answer": "9"})
    assert status == 200 and "between 1 and 5" in json.loads(body)["errors"]["answer"]
    assert fake.submit(ALICE, view, {"answer": "3"}) == (200, "")
    assert Approval.objects.get(pk=approval.pk).answer == 3


# --- Who gets it, and every copy following ----------------------------------------------------------


@through_the_loop
def test_a_four_eyes_call_goes_only_to_eligible_approvers_and_one_press_updates_every_copy(fake, alice, bob, carol, mallory, ops_agent):
    for user, slack_id in ((alice, ALICE), (bob, BOB), (carol, CAROL), (mallory, MALLORY)):
        link(fake, user, slack_id)

    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))

    assert approval.approver_required
    assert sorted(a.user.username for a in CHANNEL.recipients(approval)) == ["bob", "carol"]
    assert not request_to(fake, ALICE, approval) and not request_to(fake, MALLORY, approval)
    fake.press(BOB, request_to(fake, BOB, approval), "Approve")
    for slack_id in (BOB, CAROL):
        assert "Approved by bob via slack" in fake.text_of(request_to(fake, slack_id, approval))
        assert fake.buttons(request_to(fake, slack_id, approval)) == {}
    assert set(SlackMessage.objects.filter(approval=approval).values_list("status", flat=True)) == {"closed"}


@through_the_loop
def test_an_edit_after_sending_rewrites_every_copy_and_the_old_buttons_decide_nothing(fake, alice, bob, carol, ops_agent):
    link(fake, bob, BOB)
    link(fake, carol, CAROL)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    before = request_to(fake, CAROL, approval)

    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="chat", shown_hash=approval.shown_hash)

    after = request_to(fake, CAROL, approval)
    assert "b.txt" in fake.text_of(after) and before["ts"] == after["ts"]
    bobs = request_to(fake, BOB, approval)  # bob edited it: four eyes, he may no longer approve it
    assert "now decided by others" in fake.text_of(bobs) and list(fake.buttons(bobs)) == ["Open on the site"]
    fake.press(CAROL, before, "Approve")  # the button as it was before the edit
    assert fake.ephemerals(CAROL)[-1].startswith("The call was edited after this message")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    fake.press(CAROL, after, "Approve")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approved_arguments) == ("approved", carol, {"path": "b.txt"})
    assert "Approved by carol via slack" in fake.text_of(request_to(fake, BOB, approval))


@through_the_loop
def test_a_vote_below_quorum_is_counted_on_every_copy_which_keeps_its_buttons(fake, alice, ops_agent):
    group = Group.objects.create(name="finance")
    dana, erin = (User.objects.create_user(name) for name in ("dana", "erin"))
    for member in (dana, erin):
        member.groups.add(group)
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)
    link(fake, dana, DANA)
    link(fake, erin, ERIN)
    approval = only_pending(start_conversation(alice, ops_agent, "email bob@example.com about lunch"))
    assert "0 of 2 approvals" in fake.text_of(request_to(fake, ERIN, approval))

    fake.press(DANA, request_to(fake, DANA, approval), "Approve")

    assert fake.ephemerals(DANA)[-1] == "Your approval is counted: 1 of 2 approvals: dana."
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    erins = request_to(fake, ERIN, approval)
    assert "1 of 2 approvals: dana" in fake.text_of(erins) and "Approve" in fake.buttons(erins)
    fake.press(ERIN, erins, "Approve")
    assert Approval.objects.get(pk=approval.pk).status == "approved"
    assert "Approved by erin via slack" in fake.text_of(request_to(fake, DANA, approval))


@through_the_loop
def test_a_due_reminder_replies_once_under_the_request_of_each_approver_who_has_not_voted(fake, alice, ops_agent, settings):
    group = Group.objects.create(name="finance")
    dana, erin = (User.objects.create_user(name) for name in ("dana", "erin"))
    for member in (dana, erin):
        member.groups.add(group)
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2, remind_after_seconds=1)
    link(fake, dana, DANA)
    link(fake, erin, ERIN)
    approval = only_pending(start_conversation(alice, ops_agent, "email bob@example.com about lunch"))
    fake.press(DANA, request_to(fake, DANA, approval), "Approve")

    assert escalation.send_due_reminders(now=timezone.now() + timedelta(seconds=5)) == [approval.pk]

    (reminder,) = fake.replies_to(ERIN)
    assert reminder["thread_ts"] == request_to(fake, ERIN, approval)["ts"]
    assert reminder["text"].startswith(f"⏰ Reminder: still waiting for a decision on #{approval.pk}")
    assert "1 of 2 approvals: dana" in reminder["text"] and not fake.replies_to(DANA)  # dana voted
    assert CHANNEL.queue_reminders(approval) == []  # the signal again: no second reminder
    sweep()
    assert len(fake.replies_to(ERIN)) == 1


@through_the_loop
def test_a_reminder_lost_with_its_task_is_sent_by_the_sweep_and_never_after_the_decision(fake, alice, ops_agent, settings):
    group = Group.objects.create(name="finance")
    dana = User.objects.create_user("dana")
    dana.groups.add(group)
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=1)
    link(fake, dana, DANA)
    approval = only_pending(start_conversation(alice, ops_agent, "email bob@example.com about lunch"))
    ((_, lost),) = CHANNEL.queue_reminders(approval)  # queued, its task lost

    sweep()

    assert Reminder.objects.get(pk=lost).status == "sent" and len(fake.replies_to(DANA)) == 1
    Reminder.objects.filter(pk=lost).update(status="queued")  # as if queued again before the decision
    fake.press(DANA, request_to(fake, DANA, approval), "Approve")
    assert outbox.send(CHANNEL, Reminder, lost) == outbox.Sent.CLOSED and len(fake.replies_to(DANA)) == 1


@through_the_loop
def test_nothing_is_sent_without_slack_set_up(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    settings.SLACK_BOT_TOKEN = ""
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    approval_requested.send(sender=Approval, approval=approval)  # asked again (a reminder, an escalation)
    assert not CHANNEL.enabled() and not SlackMessage.objects.exists()


# --- The outbox -------------------------------------------------------------------------------------


@through_the_loop
def test_a_failed_send_stays_queued_and_the_sweep_sends_it_again_once(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"chat.postMessage"}

    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.attempts, row.ts) == ("queued", 1, "")
    assert "service_unavailable" in row.last_error or "503" in row.last_error
    assert stale_rows(settings) == ([(SlackMessage, row.pk)], [], [])
    fake.failing = set()
    sweep()
    row.refresh_from_db()
    assert (row.status, row.last_error) == ("sent", "") and request_to(fake, ALICE, approval)
    sweep()
    assert len(fake.sent("chat.postMessage", channel=ALICE)) == 1


@through_the_loop
def test_a_send_slack_refuses_for_good_is_failed_at_once_and_shown_to_operators(fake, alice, agent, settings, admin_client):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.refusing = {"chat.postMessage": "channel_not_found"}

    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.last_error) == ("failed", "channel_not_found")
    assert stale_rows(settings) == ([], [], [])
    page = admin_client.get("/admin/slacklink/slackmessage/?status__exact=failed")
    assert page.status_code == 200 and "channel_not_found" in page.content.decode()


@through_the_loop
def test_a_send_that_keeps_failing_gives_up_after_the_retries(fake, alice, agent, settings):
    settings.HITL_SLACK_RETRIES = 1
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"chat.postMessage"}
    assert send(row) == send(row) == outbox.Sent.FAILED
    assert send(row) == outbox.Sent.NOT_CLAIMED
    assert SlackMessage.objects.get(pk=row.pk).status == "failed"


@through_the_loop
def test_a_decision_while_slack_is_down_is_made_and_the_sweep_updates_the_message_later(pending, fake, alice, settings):
    approval, message = pending
    fake.failing = {"chat.update"}

    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)

    assert Approval.objects.get(pk=approval.pk).status == "approved"
    row = SlackMessage.objects.get(approval=approval)
    assert row.status == "sent" and row.last_error
    assert stale_rows(settings) == ([], [row.pk], [])
    fake.failing = set()
    sweep()
    assert SlackMessage.objects.get(pk=row.pk).status == "closed"
    assert "Approved by alice via chat" in fake.text_of(request_to(fake, ALICE, approval))


@through_the_loop
def test_a_message_decided_before_it_was_sent_is_closed_unsent(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    assert SlackMessage.objects.get(pk=row.pk).status == "closed"
    assert send(row) == outbox.Sent.NOT_CLAIMED
    assert not fake.sent("chat.postMessage")


@through_the_loop
def test_a_press_on_a_copy_whose_send_was_never_recorded_records_it_and_updates_it(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.lost_answers = {"chat.postMessage"}
    assert send(row) == outbox.Sent.FAILED
    fake.lost_answers = set()
    delivered = request_to(fake, ALICE, approval)

    fake.press(ALICE, delivered, "Approve")

    row.refresh_from_db()
    assert (row.status, row.ts) == ("closed", delivered["ts"])
    assert "Approved by alice via slack" in fake.text_of(request_to(fake, ALICE, approval))


# --- The profile page ---------------------------------------------------------------------------------


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


# --- More of what an outsider tries -------------------------------------------------------------------


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


@through_the_loop
def test_the_card_and_the_history_show_a_decision_made_in_slack_as_via_slack(fake, alice, bob, carol, ops_agent):
    link(fake, bob, BOB)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    fake.press(BOB, request_to(fake, BOB, approval), "Reject")
    assert fake.submit(BOB, fake.views()[-1], {}) == (200, "")  # the reason left empty
    assert Approval.objects.get(pk=approval.pk).decided_via == "slack"
    card = client_for(alice).get(f"/conversations/{approval.conversation_id}/").content.decode()
    assert "by bob via slack" in card
    history = client_for(bob).get("/approvals/history/")
    assert history.status_code == 200 and '<td data-label="Via">slack</td>' in history.content.decode()


# --- The stand-in speaks the Web API as slack_sdk meets it ---------------------------------------------


def test_the_stand_in_refuses_what_slack_refuses(fake, settings):
    from slack_sdk.errors import SlackApiError

    from slacklink import client

    too_long = [{"type": "section", "text": {"type": "plain_text", "text": "x" * 3001}}]
    with pytest.raises(SlackApiError) as refused:
        client.post(ALICE, "hello", too_long)
    assert client.error_code(refused.value) == "invalid_blocks" and client.is_permanent(refused.value)
    with pytest.raises(SlackApiError) as refused:
        client.open_view("never-issued", {"type": "modal", "blocks": []})
    assert client.error_code(refused.value) == "invalid_trigger_id"
    settings.SLACK_BOT_TOKEN = "xoxb-wrong"
    with pytest.raises(SlackApiError) as refused:
        client.post(ALICE, "hello", [])
    assert client.error_code(refused.value) == "invalid_auth" and not client.is_permanent(refused.value)
    assert not fake.calls


@through_the_loop
def test_a_wrong_bot_token_keeps_the_message_queued_with_slacks_error_until_it_is_fixed(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    token, settings.SLACK_BOT_TOKEN = settings.SLACK_BOT_TOKEN, "xoxb-revoked"

    assert send(row) == outbox.Sent.FAILED
    assert SlackMessage.objects.get(pk=row.pk).last_error == "invalid_auth"

    settings.SLACK_BOT_TOKEN = token
    sweep()
    assert SlackMessage.objects.get(pk=row.pk).status == "sent" and request_to(fake, ALICE, approval)


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


# --- Issue 35: only what was shown whole is approved; every kind; warned before it expires ---------------


def forge(fake, slack_id: str, message: dict, action_id: str, value: str) -> tuple[int, str]:
    """A press of a button the message does not have, correctly signed: what an attacker who read the message sends."""
    return fake.act(slack_id, message, {"type": "button", "action_id": action_id, "block_id": "decide", "value": value})


def long_write(user, agent) -> Approval:
    return only_pending(start_conversation(user, agent, f"call write_file with {json.dumps({'path': 'setup.sh', 'content': 'y' * 13000})}"))


@through_the_loop
def test_a_forged_signed_approve_press_on_a_cut_message_is_refused_and_decides_nothing(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = long_write(alice, agent)
    message = request_to(fake, ALICE, approval)
    token = fake.buttons(message)["Reject"]["value"]
    assert "Approve" not in fake.buttons(message)

    assert forge(fake, ALICE, message, blocks.APPROVE, token)[0] == 200

    assert fake.ephemerals(ALICE)[-1].startswith("This message showed the call cut: open it on the site to approve:")
    assert blocks.conversation_url(approval) in fake.ephemerals(ALICE)[-1]
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("pending", None)
    assert SlackMessage.objects.get(approval=approval).status == "sent" and fake.buttons(request_to(fake, ALICE, approval))
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)  # the site, whole
    assert Approval.objects.get(pk=approval.pk).status == "approved"


@through_the_loop
def test_a_forged_confirmation_of_a_cut_critical_call_is_refused_in_the_press_and_in_the_modal(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = ["critical"]
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    message = request_to(fake, ALICE, approval)
    token = fake.buttons(message)["Reject"]["value"]

    forge(fake, ALICE, message, blocks.APPROVE, token)
    status, body = fake.submit(ALICE, {"callback_id": blocks.CONFIRM_VIEW, "private_metadata": token}, {"confirmation": "DELETE"})

    assert fake.ephemerals(ALICE)[-1].startswith("This message showed the call cut") and not fake.views()
    assert status == 200 and json.loads(body)["errors"]["confirmation"] == "This message showed the call cut: open it on the site to approve."
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_for_a_sentence_only_risk_the_message_carries_the_sentence_and_no_arguments_or_preview(fake, alice, agent, settings):
    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = ["medium"]
    link(fake, alice, ALICE)
    secret = "the-secret-content-of-the-file"
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'notes.txt', 'content': secret})}"))
    assert approval.risk == "medium"
    message = request_to(fake, ALICE, approval)

    everything = json.dumps(fake.sent("chat.postMessage", channel=ALICE))
    assert summarize(Approval.objects.get(pk=approval.pk)).head in fake.text_of(message) and "notes.txt" in fake.text_of(message)
    assert secret not in everything and "Arguments" not in everything and "Preview" not in everything
    assert "Slack gets the sentence only" in fake.text_of(message)
    assert list(fake.buttons(message)) == ["Reject", "Open on the site"]
    assert not SentVersion.objects.get(message__approval=approval).complete
    forge(fake, ALICE, message, blocks.APPROVE, fake.buttons(message)["Reject"]["value"])
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = []  # even were the setting changed since it was sent
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    assert secret not in json.dumps(request_to(fake, ALICE, approval))  # the outcome never adds what it did not carry


@through_the_loop
def test_a_plan_goes_out_as_a_generic_message_with_its_sentence_and_open_in_hitl(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "plan a tidy-up of the notes"))
    assert approval.kind == "plan"

    message = request_to(fake, ALICE, approval)

    summary = summarize(Approval.objects.get(pk=approval.pk))
    assert message is not None and summary.head in fake.text_of(message) and "Slack cannot show this request" in fake.text_of(message)
    assert list(fake.buttons(message)) == ["Open in hitl"]
    assert fake.buttons(message)["Open in hitl"]["url"] == blocks.conversation_url(approval)
    forge(fake, ALICE, message, blocks.APPROVE, SentVersion.objects.get(message__approval=approval).token)
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_question_of_a_type_slack_cannot_answer_goes_out_generic(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "ask me for a date")
    Approval.objects.filter(pk=approval.pk).update(question={**approval.question, "type": "file"})  # a type added later

    assert send(row) == outbox.Sent.SENT

    message = request_to(fake, ALICE, approval)
    assert "question: Which date?" in fake.text_of(message) and list(fake.buttons(message)) == ["Open in hitl"]


@through_the_loop
def test_a_kind_added_later_renders_generic_and_slack_takes_it(fake, alice, agent):
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    approval = Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=approval.pk)
    approval.kind = "handoff"  # not a kind yet: what a later one meets

    text, content = blocks.request(approval, "token")

    assert text and "Write a.txt" in text
    assert [e["text"]["text"] for b in content if b["type"] == "actions" for e in b["elements"]] == ["Open in hitl"]
    from slacklink import client
    assert client.post(ALICE, text, content)[1]  # the stand-in checks Block Kit's limits as Slack does


@through_the_loop
def test_a_call_that_fits_over_several_blocks_is_shown_whole_and_approvable(fake, alice, agent):
    link(fake, alice, ALICE)
    content = "\n".join(f"line {n}: " + "z" * 60 for n in range(100))  # about 7,000 characters: three blocks
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'big.txt', 'content': content})}"))
    message = request_to(fake, ALICE, approval)

    details = "\n".join(b["elements"][0]["elements"][0]["text"] for b in message["blocks"] if b["type"] == "rich_text")
    assert len([b for b in message["blocks"] if b["type"] == "rich_text"]) >= 3
    assert details.replace("\n", "") == summarize(Approval.objects.get(pk=approval.pk)).details.replace("\n", "")
    fake.press(ALICE, message, "Approve")
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_details_are_split_in_pieces_slack_takes_and_nothing_is_lost():
    text = "a" * 2899 + "😀" + "b\n" * 3000 + "c" * 5000
    pieces = blocks._pieces(text, blocks.MAX_DETAIL)
    assert all(blocks._units(piece) <= blocks.MAX_DETAIL for piece in pieces)
    assert "".join(pieces).replace("\n", "") == text.replace("\n", "")


@through_the_loop
def test_a_declined_question_asks_why_and_the_reason_is_kept(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "ask me to choose between tea, coffee and water"))
    fake.press(ALICE, request_to(fake, ALICE, approval), "Reject (decline to answer)")
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert fake.submit(ALICE, fake.views()[-1], {"reason": "ask someone else"}) == (200, "")

    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("declined", "ask someone else", "slack")


def expiring(approval: Approval) -> None:
    """What the expiry sweep does when the warning is due: the signal, after its commit."""
    from approvals.signals import approvals_expiring

    approvals_expiring.send(sender=Approval, approvals=[Approval.objects.get(pk=approval.pk)])


@through_the_loop
def test_a_due_warning_replies_once_under_each_copy_with_when_it_expires_and_an_extend_button(pending, fake, alice):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=3, seconds=30))

    expiring(approval)
    expiring(approval)  # a second signal for the same deadline
    sweep()

    (warning,) = fake.replies_to(ALICE)
    deadline = Approval.objects.get(pk=approval.pk).expires_at
    assert warning["thread_ts"] == message["ts"]
    assert fake.text_of(warning).startswith(f"Expires at {deadline:%H:%M} UTC (in 4 min)")
    assert list(fake.buttons(warning)) == ["Extend", "Open on the site"]
    assert Reminder.objects.get().kind == "expiring"


@through_the_loop
def test_extend_on_the_warning_pushes_the_deadline_back_as_the_presser_and_every_copy_shows_it(pending, fake, alice):
    approval, message = pending
    before = timezone.now() + timedelta(minutes=2)
    Approval.objects.filter(pk=approval.pk).update(expires_at=before)
    expiring(approval)
    (warning,) = fake.replies_to(ALICE)

    assert fake.press(ALICE, warning, "Extend")[0] == 200

    approval.refresh_from_db()
    assert approval.expires_at > before and approval.extended_by == alice
    assert fake.ephemerals(ALICE)[-1] == f"Extended: #{approval.pk} now expires at {approval.expires_at:%H:%M} UTC."
    now = request_to(fake, ALICE, approval)
    assert now["ts"] == message["ts"]
    assert f"Expires at {approval.expires_at:%Y-%m-%d %H:%M} UTC, extended by alice" in fake.text_of(now)
    assert SlackMessage.objects.get(approval=approval).ts == message["ts"]  # the reply's ts never replaced the request's

    fake.press(ALICE, warning, "Extend")
    assert "already extended once" in fake.ephemerals(ALICE)[-1]
    expiring(approval)  # the new deadline's warning: no second extend offered
    assert list(fake.buttons(fake.replies_to(ALICE)[-1])) == ["Open on the site"] and len(fake.replies_to(ALICE)) == 2


@through_the_loop
def test_extend_is_refused_for_someone_else_and_for_an_expired_approval(pending, fake, alice, mallory):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=2))
    expiring(approval)
    (warning,) = fake.replies_to(ALICE)
    link(fake, mallory, MALLORY)
    fake.press(MALLORY, warning, "Extend")
    assert fake.ephemerals(MALLORY)[-1] == "This request is no longer known."

    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    fake.press(ALICE, warning, "Extend")

    assert fake.ephemerals(ALICE)[-1].startswith("too late: expired")
    assert Approval.objects.get(pk=approval.pk).extended_at is None


@through_the_loop
def test_an_expired_message_says_so_and_links_to_its_card_to_ask_again(pending, fake, alice):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert approval_services.expire_overdue() == [approval.pk]

    now = request_to(fake, ALICE, approval)
    assert "Expired" in fake.text_of(now) and list(fake.buttons(now)) == ["Open in hitl to ask again"]
    assert fake.buttons(now)["Open in hitl to ask again"]["url"] == blocks.conversation_url(approval)


@through_the_loop
def test_a_warning_lost_with_its_task_is_sent_by_the_sweep_once_and_never_after_the_decision(pending, fake, alice):
    approval, message = pending
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=2))
    ((_, lost),) = CHANNEL.queue_warnings(Approval.objects.get(pk=approval.pk))  # queued, its task lost

    sweep()
    sweep()

    assert Reminder.objects.get(pk=lost).status == "sent" and len(fake.replies_to(ALICE)) == 1
    Reminder.objects.filter(pk=lost).update(status="queued")
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    assert outbox.send(CHANNEL, Reminder, lost) == outbox.Sent.CLOSED and len(fake.replies_to(ALICE)) == 1


@through_the_loop
def test_a_copy_sent_after_its_approval_was_warned_gets_the_warning_too(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(seconds=50), warned_at=timezone.now())
    expiring(approval)  # the warning went out while the copy was still queued: nothing to reply under yet
    assert not fake.replies_to(ALICE)

    send_later(CHANNEL, [row.pk])

    (warning,) = fake.replies_to(ALICE)
    assert warning["thread_ts"] == request_to(fake, ALICE, approval)["ts"] and "Extend" in fake.buttons(warning)


@through_the_loop
def test_a_warning_whose_signal_was_lost_is_queued_and_sent_by_the_sweep_once(pending, fake, alice, settings):
    approval, message = pending
    # Warned by a worker that died before its signal (or had no Slack set up): no warning row.
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=2), warned_at=timezone.now())
    sweep()  # warned just now: the signal still has its chance
    assert not Reminder.objects.exists() and not fake.replies_to(ALICE)

    settings.HITL_SLACK_STALE_SECONDS = 0
    sweep()
    sweep()

    (warning,) = fake.replies_to(ALICE)
    assert warning["thread_ts"] == message["ts"] and "Extend" in fake.buttons(warning)
