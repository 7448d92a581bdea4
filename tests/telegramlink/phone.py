"""The telegramlink tests' side of Telegram: the fake Bot API (one that can also refuse), updates
sent as a phone sends them, what the bot sent back, and a queued message sent by hand."""
import threading

import pytest

from approvals.models import Approval
from deliveries import outbox
from telegramlink import accounts, updates
from telegramlink.channel import CHANNEL
from telegramlink.models import ApprovalMessage, TelegramAccount
from tests.conftest import only_pending, start_conversation
from tests.standins.fake_telegram import FakeTelegram

# Linking, updates without approvals, the webhook's checks and the page need no commit; whatever
# goes through the loop and the decision service does (their signals are sent on commit).
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
