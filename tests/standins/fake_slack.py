"""A local stand-in for Slack, for the tests, both ways round. The Web API side: an HTTP server
answering what slack_sdk's WebClient sends (POST <base>/chat.postMessage, chat.update, views.open,
chat.postEphemeral; JSON or form bodies; a bearer token; {"ok": ...} answers), recording each call,
refusing what Slack refuses (a wrong token, blocks past Block Kit's limits, an unknown trigger_id).
The user side: presses, modal submissions and slash commands sent to the site exactly as Slack
sends them (form-encoded, `payload=` for interactions, signed v0 over "v0:{ts}:{body}")."""
import hashlib
import hmac
import itertools
import json
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode

import httpx

from tests.standins.serving import QuietHandler, Served, maybe_json

TEAM = "T0HITL"
APP_USER = "U0HITLAPP"  # the app's own user, as a mention names it
MAX_BLOCKS, MAX_BLOCK_TEXT, MAX_FIELD, MAX_BUTTON_TEXT, MAX_VALUE, MAX_MESSAGE_TEXT = 50, 3000, 2000, 75, 2000, 40000


def sign(secret: str, body: str, timestamp: int | None = None) -> dict:
    """The headers Slack sends with `body`: its timestamp, and v0= HMAC-SHA256 of "v0:{ts}:{body}"."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}",
            "Content-Type": "application/x-www-form-urlencoded"}


def django_poster(client):
    """Deliver to the site through a Django test client: (path, body, headers) -> (status, text)."""
    def post(path: str, body: str, headers: dict):
        response = client.generic("POST", path, body.encode(), content_type=headers["Content-Type"],
                                  headers={k: v for k, v in headers.items() if k != "Content-Type"})
        return response.status_code, response.content.decode()
    return post


def http_poster(base_url: str):
    """Deliver to a running site over HTTP (daphne)."""
    def post(path: str, body: str, headers: dict):
        response = httpx.post(base_url + path, content=body.encode(), headers=headers, timeout=20)
        return response.status_code, response.text
    return post


class FakeSlack(Served):
    def __init__(self, token: str = "xoxb-test-token", signing_secret: str = "test-signing-secret", *, port: int = 0, poster=None):
        self.token, self.signing_secret, self.poster = token, signing_secret, poster
        self.calls: list[tuple[str, dict]] = []
        self.changed = threading.Condition()
        self.messages: dict[tuple[str, str], dict] = {}  # (channel, ts) -> the message as the person sees it now
        self.triggers: set[str] = set()
        self.replies: list[dict] = []  # replies in a message's thread
        self.failing: set[str] = set()  # methods that answer 503 until removed
        self.lost_answers: set[str] = set()  # carried out, but the answer is lost (502)
        self.refusing: dict[str, str] = {}  # method -> Slack error name to answer with
        self._ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def url(self) -> str:
        """The Web API base URL (SLACK_API_BASE_URL)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/"

    # --- What a test reads --------------------------------------------------------------------------

    def sent(self, method: str, **match) -> list[dict]:
        with self.changed:
            return [body for name, body in self.calls if name == method and all(body.get(k) == v for k, v in match.items())]

    def messages_to(self, user_id: str) -> list[dict]:
        """The messages in `user_id`'s direct messages with the app, as they show now, oldest first."""
        with self.changed:
            return [m for (channel, _), m in sorted(self.messages.items(), key=lambda i: i[0][1]) if channel == dm(user_id)]

    def replies_to(self, user_id: str) -> list[dict]:
        with self.changed:
            return [reply for reply in self.replies if reply["channel"] == dm(user_id)]

    def ephemerals(self, user_id: str) -> list[str]:
        return [body["text"] for body in self.sent("chat.postEphemeral", user=user_id)]

    def views(self) -> list[dict]:
        return [body["view"] for body in self.sent("views.open")]

    @staticmethod
    def buttons(message: dict) -> dict[str, dict]:
        """{label: element} of a message's buttons (none once decided)."""
        return {e["text"]["text"]: e for block in message.get("blocks") or [] if block["type"] == "actions"
                for e in block["elements"] if e["type"] == "button"}

    @staticmethod
    def select(message: dict) -> dict | None:
        return next((e for block in message.get("blocks") or [] if block["type"] == "actions"
                     for e in block["elements"] if e["type"] == "static_select"), None)

    @staticmethod
    def text_of(message: dict) -> str:
        """Every piece of text a person reads in the message's blocks."""
        def texts(node):
            if isinstance(node, dict):
                if node.get("type") in ("plain_text", "mrkdwn", "text") and isinstance(node.get("text"), str):
                    yield node["text"]
                for key, value in node.items():
                    if key != "text" or not isinstance(value, str):
                        yield from texts(value)
            elif isinstance(node, list):
                for item in node:
                    yield from texts(item)
        return "\n".join(texts(message.get("blocks") or []))

    # --- What a test does as a Slack user: sent to the site, signed --------------------------------

    def command(self, user_id: str, text: str, *, team: str = TEAM, username: str = "") -> tuple[int, str]:
        body = urlencode({
            "token": "deprecated", "team_id": team, "team_domain": "hitl", "channel_id": dm(user_id), "channel_name": "directmessage",
            "user_id": user_id, "user_name": username or user_id.lower(), "command": "/hitl", "text": text,
            "api_app_id": "A0HITL", "response_url": "https://hooks.slack.invalid/commands/1", "trigger_id": self._trigger(),
        })
        return self.deliver("/slack/commands/", body)

    def message(self, user_id: str, text: str, *, channel: str = "", mention: bool = False, team: str = TEAM,
                extra: dict | None = None) -> tuple[int, str]:
        """A message the person writes, as the Events API delivers it (JSON, signed): in their direct
        messages with the app (`message`, channel_type im), or mentioning the app in `channel`
        (`app_mention`, its text starting with the app's <@U…>)."""
        event = {
            "type": "app_mention" if mention else "message", "user": user_id, "text": f"<@{APP_USER}> {text}" if mention else text,
            "channel": channel or dm(user_id), "channel_type": "channel" if mention else "im",
            "ts": f"{int(time.time())}.{next(self._ids):06d}", "event_ts": f"{int(time.time())}.000000", **(extra or {}),
        }
        return self.event(event, team=team)

    def event(self, event: dict, *, team: str = TEAM, event_id: str = "") -> tuple[int, str]:
        body = json.dumps({
            "token": "deprecated", "team_id": team, "api_app_id": "A0HITL", "type": "event_callback", "event": event,
            "event_id": event_id or f"Ev{next(self._ids):08d}", "event_time": int(time.time()),
        })
        return self.deliver("/slack/events/", body, headers=sign(self.signing_secret, body) | {"Content-Type": "application/json"})

    def said_in(self, channel: str) -> list[dict]:
        """What the app posted to `channel` (a D… or C… id), oldest first."""
        return [body for method, body in self.calls if method == "chat.postMessage" and channel in (body["channel"], dm(body["channel"]))]

    def press(self, user_id: str, message: dict, label: str, *, team: str = TEAM) -> tuple[int, str]:
        """Press the button labelled `label` on `message`, as `user_id`."""
        button = self.buttons(message)[label]
        action = {"type": "button", "action_id": button["action_id"], "block_id": "decide", "text": button["text"],
                  "value": button.get("value", ""), "action_ts": str(time.time())}
        return self.act(user_id, message, action, team=team)

    def choose(self, user_id: str, message: dict, label_start: str, *, team: str = TEAM) -> tuple[int, str]:
        """Pick the option of the message's select whose label starts with `label_start`."""
        select = self.select(message)
        option = next(o for o in select["options"] if o["text"]["text"].startswith(label_start))
        action = {"type": "static_select", "action_id": select["action_id"], "block_id": "decide", "selected_option": option,
                  "action_ts": str(time.time())}
        return self.act(user_id, message, action, team=team)

    def act(self, user_id: str, message: dict, action: dict, *, team: str = TEAM) -> tuple[int, str]:
        payload = {
            "type": "block_actions", "team": {"id": team, "domain": "hitl"},
            "user": {"id": user_id, "username": user_id.lower(), "team_id": team}, "api_app_id": "A0HITL",
            "container": {"type": "message", "message_ts": message.get("ts", ""), "channel_id": message.get("channel", ""), "is_ephemeral": False},
            "trigger_id": self._trigger(), "channel": {"id": message.get("channel", ""), "name": "directmessage"},
            "message": {k: v for k, v in message.items() if k in ("ts", "text", "blocks")},
            "response_url": "https://hooks.slack.invalid/actions/1", "actions": [action],
        }
        return self.interact(payload)

    def submit(self, user_id: str, view: dict, values: dict[str, str], *, team: str = TEAM) -> tuple[int, str]:
        """Submit a modal the app opened, its inputs filled with `values` ({block_id: text})."""
        state = {block: {block: {"type": "plain_text_input", "value": text}} for block, text in values.items()}
        payload = {
            "type": "view_submission", "team": {"id": team, "domain": "hitl"},
            "user": {"id": user_id, "username": user_id.lower(), "team_id": team}, "api_app_id": "A0HITL", "trigger_id": self._trigger(),
            "view": {"id": f"V{next(self._ids)}", "type": "modal", "callback_id": view["callback_id"],
                     "private_metadata": view.get("private_metadata", ""), "state": {"values": state}},
        }
        return self.interact(payload)

    def interact(self, payload: dict) -> tuple[int, str]:
        return self.deliver("/slack/interactions/", urlencode({"payload": json.dumps(payload)}))

    def deliver(self, path: str, body: str, *, headers: dict | None = None) -> tuple[int, str]:
        return self.poster(path, body, headers or sign(self.signing_secret, body))

    def _trigger(self) -> str:
        trigger = f"{next(self._ids)}.{int(time.time())}.trigger"
        with self.changed:
            self.triggers.add(trigger)
        return trigger

    # --- The Web API --------------------------------------------------------------------------------

    def _result(self, method: str, body: dict) -> dict:
        if method == "chat.postMessage" and body.get("thread_ts"):
            channel = dm(body["channel"]) if str(body["channel"]).startswith("U") else body["channel"]
            if (channel, body["thread_ts"]) not in self.messages:
                return {"ok": False, "error": "thread_not_found"}
            ts = f"{int(time.time())}.{next(self._ids):06d}"
            self.replies.append({"channel": channel, "ts": ts, "thread_ts": body["thread_ts"], "text": body.get("text", ""),
                                 "blocks": body.get("blocks") or []})
            return {"channel": channel, "ts": ts}
        if method == "chat.postMessage":
            channel = dm(body["channel"]) if str(body["channel"]).startswith("U") else body["channel"]
            ts = f"{int(time.time())}.{next(self._ids):06d}"
            message = {"channel": channel, "ts": ts, "text": body.get("text", ""), "blocks": body.get("blocks") or []}
            self.messages[(channel, ts)] = message
            return {"channel": channel, "ts": ts, "message": message}
        if method == "chat.update":
            key = (body["channel"], body["ts"])
            if key not in self.messages:
                return {"ok": False, "error": "message_not_found"}
            self.messages[key] = dict(self.messages[key], text=body.get("text", ""), blocks=body.get("blocks") or [])
            return {"channel": body["channel"], "ts": body["ts"], "text": body.get("text", "")}
        if method == "views.open":
            if body.get("trigger_id") not in self.triggers:
                return {"ok": False, "error": "invalid_trigger_id"}
            self.triggers.discard(body["trigger_id"])  # a trigger opens one view
            return {"view": dict(body.get("view") or {}, id=f"V{next(self._ids)}")}
        if method == "chat.postEphemeral":
            return {"message_ts": f"{int(time.time())}.{next(self._ids):06d}"}
        return {"ok": False, "error": "unknown_method"}

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            def do_POST(self):
                raw = self.body().decode()
                if not self.path.startswith("/api/"):
                    return self.send_json(404, {"ok": False, "error": "unknown_method"})
                method = self.path[len("/api/"):].split("?")[0]
                if "json" in (self.headers.get("Content-Type") or ""):
                    body = json.loads(raw or "{}")
                else:
                    body = {key: maybe_json(value) for key, value in parse_qsl(raw)}
                if method in fake.failing:
                    return self.send_json(503, {"ok": False, "error": "service_unavailable"})
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self.send_json(200, {"ok": False, "error": "invalid_auth"})
                if error := fake.refusing.get(method) or _refusal(method, body):
                    return self.send_json(200, {"ok": False, "error": error})
                with fake.changed:
                    result = fake._result(method, body)
                    if result.get("ok", True):
                        fake.calls.append((method, body))
                    fake.changed.notify_all()
                if method in fake.lost_answers:
                    return self.send_json(502, {"ok": False, "error": "bad_gateway"})
                self.send_json(200, {"ok": True, **result} if result.get("ok", True) else result)

        return Handler


def dm(user_id: str) -> str:
    """The direct message channel of the app with `user_id` (Slack answers a post to U… with D…)."""
    return "D" + str(user_id)[1:]


def _refusal(method: str, body: dict) -> str:
    """What Slack refuses in a message or a view, as its error names it."""
    if method not in ("chat.postMessage", "chat.update", "views.open", "chat.postEphemeral"):
        return ""
    if method in ("chat.postMessage", "chat.update") and len(str(body.get("text", ""))) > MAX_MESSAGE_TEXT:
        return "msg_too_long"
    blocks = (body.get("view") or {}).get("blocks") if method == "views.open" else body.get("blocks")
    if blocks is None:
        return "" if body.get("text") else "no_text"
    if not isinstance(blocks, list) or len(blocks) > MAX_BLOCKS:
        return "invalid_blocks"
    for block in blocks:
        if not _valid_block(block):
            return "invalid_blocks"
    return ""


def _valid_block(block: dict) -> bool:
    kind = block.get("type")
    if kind == "section":
        text = (block.get("text") or {}).get("text", "")
        fields = block.get("fields") or []
        return len(text) <= MAX_BLOCK_TEXT and len(fields) <= 10 and all(len(f["text"]) <= MAX_FIELD for f in fields)
    if kind == "rich_text":
        return all(len(t.get("text", "")) <= MAX_BLOCK_TEXT for e in block["elements"] for t in e["elements"])
    if kind == "context":
        return len(block["elements"]) <= 10 and all(len(e["text"]) <= MAX_BLOCK_TEXT for e in block["elements"])
    if kind == "actions":
        elements = block["elements"]
        for element in elements:
            if element["type"] == "button":
                if len(element["text"]["text"]) > MAX_BUTTON_TEXT or len(element.get("value", "")) > MAX_VALUE:
                    return False
            elif element["type"] == "static_select":
                options = element["options"]
                if len(options) > 100 or any(len(o["text"]["text"]) > 75 or len(o["value"]) > 150 for o in options):
                    return False
        return 0 < len(elements) <= 25
    return kind in ("input", "divider", "header")
