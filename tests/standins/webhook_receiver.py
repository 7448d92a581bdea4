"""A local HTTP server that records webhook calls; it can be told to fail the first N of them, or to
run something (say, a second sweep) once while the first call is still being answered."""
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

import pytest
from django.db import connections

from tests.standins.serving import QuietHandler


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
    during_call: Callable[[], object] | None = None  # run once, in the server's thread, before answering
    errors: list[BaseException] = field(default_factory=list)  # what during_call raised

    def events(self) -> list[str]:
        return [call.json["event"] for call in self.calls]


@pytest.fixture
def webhook_receiver():
    receiver = WebhookReceiver()
    lock = threading.Lock()

    class Handler(QuietHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            with lock:
                receiver.calls.append(Received(dict(self.headers), body))
                failing = receiver.failures_left > 0
                receiver.failures_left -= 1 if failing else 0
                during_call, receiver.during_call = receiver.during_call, None
            if during_call:
                self.run(during_call)
            self.send_response(500 if failing else 204)
            self.end_headers()

        def run(self, during_call) -> None:
            try:
                during_call()
            except BaseException as exc:  # the test thread asserts on it: an exception here is silent
                receiver.errors.append(exc)
            finally:
                connections.close_all()  # this thread's own database connection

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield receiver
    server.shutdown()
    server.server_close()
