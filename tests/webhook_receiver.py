"""A local HTTP server that records webhook calls; it can be told to fail the first N of them."""
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Received:
    headers: dict
    body: bytes

    @property
    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    url: str = ""
    calls: list[Received] = field(default_factory=list)
    failures_left: int = 0

    def events(self) -> list[str]:
        return [call.json["event"] for call in self.calls]


@pytest.fixture
def webhook_receiver():
    receiver = WebhookReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            receiver.calls.append(Received(dict(self.headers), body))
            failing = receiver.failures_left > 0
            receiver.failures_left -= 1 if failing else 0
            self.send_response(500 if failing else 204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield receiver
    server.shutdown()
    server.server_close()
