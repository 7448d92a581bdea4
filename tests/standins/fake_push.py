"""A local stand-in for a browser's push service (what fcm.googleapis.com or Mozilla's autopush are
to a site), for the tests: it hands out subscriptions as a browser would (an endpoint here, a P-256
key pair and an auth secret it keeps), and takes the site's POSTs as RFC 8030/8291/8292 say: it
checks the VAPID Authorization header (the JWT's signature, its audience, expiry and subject, and
that its key is the application server key the subscription was made with), the TTL and
Content-Encoding headers and the size, decrypts the aes128gcm body with the subscription's private
key (http_ece) and records the JSON. A subscription can be made gone (410), and the whole service
down (connections refused) and back on the same port."""
import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

import http_ece
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid02

from tests.standins.serving import QuietHandler

MAX_BODY = 4096  # RFC 8291: a push message's payload is at most 4096 octets once encrypted


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscription:
    id: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    application_server_key: str | None

    def as_json(self) -> dict:
        """What `PushSubscription.toJSON()` gives the page."""
        public = self.private_key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        return {"endpoint": self.endpoint, "expirationTime": None, "keys": {"p256dh": b64url(public), "auth": b64url(self.auth)}}


@dataclass
class Received:
    subscription_id: str
    payload: dict
    headers: dict = field(default_factory=dict)


class FakePush:
    def __init__(self, *, port: int = 0):
        self.subscriptions: dict[str, Subscription] = {}
        self.received: list[Received] = []
        self.refused: list[tuple[int, str]] = []  # (status, why) of each POST refused
        self.gone: set[str] = set()  # subscription ids that answer 410 Gone
        self.failing = False  # answer 503 to everything
        self.changed = threading.Condition()
        self.port = port
        self.server = None

    # The service's life.
    def start(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Down: connections to it are refused until start() again (same port, same subscriptions)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # What a browser does.
    def subscribe(self, application_server_key: str | None = None) -> dict:
        """A new subscription as the browser's PushSubscription.toJSON() gives it; with
        `application_server_key`, only POSTs signed with that VAPID key are taken (as real services do)."""
        sid = secrets.token_urlsafe(12)
        subscription = Subscription(sid, f"{self.url}/push/{sid}", ec.generate_private_key(ec.SECP256R1()), secrets.token_bytes(16),
                                    application_server_key)
        self.subscriptions[sid] = subscription
        return subscription.as_json()

    # What a test reads.
    def messages(self, endpoint: str | None = None) -> list[dict]:
        with self.changed:
            return [r.payload for r in self.received if endpoint is None or self.subscriptions[r.subscription_id].endpoint == endpoint]

    def _handler(self):
        fake = self

        class Handler(QuietHandler):
            def do_POST(self):
                body = self.body()
                if fake.failing:
                    return self._refuse(503, "Service Unavailable")
                sid = self.path.removeprefix("/push/")
                subscription = fake.subscriptions.get(sid) if self.path.startswith("/push/") else None
                if subscription is None:
                    return self._refuse(404, "no such subscription")
                if sid in fake.gone:
                    return self._refuse(410, "subscription expired")
                if why := fake._vapid_refusal(self.headers.get("Authorization", ""), subscription):
                    return self._refuse(403 if "key" in why else 401, why)
                if self.headers.get("TTL") is None or not self.headers["TTL"].isdigit():
                    return self._refuse(400, "TTL header missing")
                if self.headers.get("Content-Encoding") != "aes128gcm":
                    return self._refuse(415, "Content-Encoding is not aes128gcm")
                if len(body) > MAX_BODY:
                    return self._refuse(413, "payload too large")
                try:
                    plain = http_ece.decrypt(body, private_key=subscription.private_key, auth_secret=subscription.auth, version="aes128gcm")
                    payload = json.loads(plain)
                except Exception as exc:  # noqa: BLE001  (a body this subscription cannot read)
                    return self._refuse(400, f"cannot decrypt: {exc.__class__.__name__}")
                with fake.changed:
                    fake.received.append(Received(sid, payload, {k.lower(): v for k, v in self.headers.items()}))
                    fake.changed.notify_all()
                self.send_response(201)
                self.send_header("Location", f"{fake.url}/message/{len(fake.received)}")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _refuse(self, status: int, why: str):
                with fake.changed:
                    fake.refused.append((status, why))
                self.send_json(status, {"code": status, "message": why})

        return Handler

    def _vapid_refusal(self, authorization: str, subscription: Subscription) -> str:
        """Why the Authorization header is refused (RFC 8292), or "" if it is good."""
        try:
            scheme, params = authorization.split(" ", 1)
            parts = dict(part.split("=", 1) for part in params.split(","))
            token, key = parts["t"], parts["k"]
            if scheme.lower() != "vapid" or not Vapid02.verify(authorization):
                return "bad VAPID signature"
            claims = json.loads(b64url_decode(token.split(".")[1]))
        except Exception:  # noqa: BLE001  (any header that is not a signed VAPID token)
            return "bad VAPID header"
        if claims.get("aud") != self.url:
            return "VAPID audience is not this push service"
        if not (time.time() < int(claims.get("exp", 0)) <= time.time() + 24 * 3600):
            return "VAPID token expired or lives past 24 hours"
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            return "VAPID subject is no contact"
        if subscription.application_server_key and key.rstrip("=") != subscription.application_server_key.rstrip("="):
            return "VAPID key is not the one this subscription was made with"
        return ""
