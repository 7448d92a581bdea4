"""A local stand-in for Telegram's Bot API, for the tests: it speaks the wire protocol
python-telegram-bot speaks (POST /bot<token>/<method>, form or JSON parameters, {"ok", "result"}),
records every call, and lets a test inject updates that `getUpdates` long-polls for. Like the real
one, it refuses a message whose text is past 4096 characters after entities parsing, and a button
whose callback_data is past 64 bytes (400 Bad Request: such a message is never delivered)."""
import html
import json
import re
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qsl

from tests.standins.serving import QuietHandler, Served, maybe_json

BOT = {"id": 4242, "is_bot": True, "first_name": "hitl", "username": "hitl_test_bot",
       "can_join_groups": False, "can_read_all_group_messages": False, "supports_inline_queries": False}


MAX_TEXT = 4096  # characters of a message's text after entities parsing (UTF-16 code units)
MAX_CALLBACK_DATA = 64  # bytes


class FakeTelegram(Served):
    def __init__(self, token: str = "4242:test-token", *, port: int = 0):
        self.token = token
        self.calls: list[tuple[str, dict]] = []
        self.updates: list[dict] = []
        self.changed = threading.Condition()
        self.next_message_id, self.next_update_id = 100, 1
        self.delivered: dict[int, dict] = {}  # message_id -> the message as a phone shows it
        self.failing: set[str] = set()  # methods that answer 500 until removed
        # Methods carried out whose answer is lost on the way back (502), as after a client-side
        # timeout: the message is delivered, the sender does not know it.
        self.lost_answers: set[str] = set()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    # What a test does as a Telegram user.
    def say(self, user_id: int, text: str, *, username: str = "") -> None:
        self._inject({"message": {
            "message_id": self._message_id(), "date": int(time.time()), "text": text,
            "chat": {"id": user_id, "type": "private"},
            "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}", "username": username or f"user{user_id}"},
        }})

    def press(self, user_id: int, data: str) -> str:
        """Press a button; like Telegram, the update carries the message the button is on."""
        query_id = f"q{self.next_update_id}"
        query = {"id": query_id, "chat_instance": "1", "data": data,
                 "from": {"id": user_id, "is_bot": False, "first_name": f"user{user_id}"}}
        with self.changed:
            on = [m for m in self.delivered.values() if m["chat"]["id"] == user_id and data in self.buttons(m).values()]
        if on:
            query["message"] = on[-1]
        self._inject({"callback_query": query})
        return query_id

    # What a test reads.
    def sent(self, method: str, **match) -> list[dict]:
        with self.changed:
            return [params for name, params in self.calls if name == method and all(params.get(k) == v for k, v in match.items())]

    def buttons(self, params: dict) -> dict[str, str]:
        """{button text: callback_data, or url for a button that opens an address} of a sendMessage's inline keyboard."""
        markup = params.get("reply_markup") or {}
        return {button["text"]: button.get("callback_data") or button.get("url") for row in markup.get("inline_keyboard", []) for button in row}

    def answer_to(self, query_id: str) -> str | None:
        answers = self.sent("answerCallbackQuery", callback_query_id=query_id)
        return answers[-1].get("text", "") if answers else None

    def _message_id(self) -> int:
        with self.changed:
            self.next_message_id += 1
            return self.next_message_id

    def _inject(self, update: dict) -> None:
        with self.changed:
            update["update_id"] = self.next_update_id
            self.next_update_id += 1
            self.updates.append(update)
            self.changed.notify_all()

    def _result(self, method: str, params: dict):
        if method == "getMe":
            return BOT
        if method == "getUpdates":
            offset = int(params.get("offset") or 0)
            deadline = time.monotonic() + min(float(params.get("timeout") or 0), 5)
            with self.changed:
                self.updates = [u for u in self.updates if u["update_id"] >= offset]
                while not self.updates and time.monotonic() < deadline:
                    self.changed.wait(deadline - time.monotonic())
                return list(self.updates)
        if method in ("sendMessage", "editMessageText"):
            chat = {"id": int(params["chat_id"]), "type": "private"}
            message_id = int(params["message_id"]) if method == "editMessageText" else self._message_id()
            message = {"message_id": message_id, "date": int(time.time()), "chat": chat, "text": params.get("text", ""),
                       "from": BOT}
            if params.get("reply_markup"):
                message["reply_markup"] = params["reply_markup"]
            with self.changed:
                self.delivered[message_id] = message
            return message
        return True  # answerCallbackQuery, setWebhook, deleteWebhook, ...

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            def do_POST(self):
                prefix = f"/bot{fake.token}/"
                if not self.path.startswith(prefix):
                    return self.send_json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
                method = self.path[len(prefix):]
                body = self.body().decode()
                if "json" in (self.headers.get("Content-Type") or ""):
                    params = json.loads(body or "{}")
                else:
                    params = {key: maybe_json(value) for key, value in parse_qsl(body)}
                for key in ("chat_id", "message_id"):
                    if isinstance(params.get(key), str) and params[key].lstrip("-").isdigit():
                        params[key] = int(params[key])
                if method in fake.failing:
                    return self.send_json(500, {"ok": False, "error_code": 500, "description": "Internal Server Error"})
                if refused := _refusal(method, params):
                    return self.send_json(400, {"ok": False, "error_code": 400, "description": f"Bad Request: {refused}"})
                if method != "getUpdates":
                    with fake.changed:
                        fake.calls.append((method, params))
                        fake.changed.notify_all()
                result = fake._result(method, params)
                if method in fake.lost_answers:
                    return self.send_json(502, {"ok": False, "error_code": 502, "description": "Bad Gateway"})
                self.send_json(200, {"ok": True, "result": result})

        return Handler


def _refusal(method: str, params: dict) -> str:
    """What the Bot API refuses in a message it is asked to send or edit, as its error says it."""
    if method not in ("sendMessage", "editMessageText"):
        return ""
    text = str(params.get("text", ""))
    if params.get("parse_mode") == "HTML":
        text = html.unescape(re.sub(r"<[^>]*>", "", text))
    if not text.strip():
        return "message text is empty"
    if len(text.encode("utf-16-le")) // 2 > MAX_TEXT:
        return "message is too long"
    markup = params.get("reply_markup") or {}
    rows = markup.get("inline_keyboard", []) if isinstance(markup, dict) else []
    if any(len(str(button.get("callback_data", "")).encode()) > MAX_CALLBACK_DATA for row in rows for button in row):
        return "BUTTON_DATA_INVALID"
    return ""
