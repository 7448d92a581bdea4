"""What the HTTP stand-ins share: a server on a thread of its own while a `with` block runs, a
request handler that logs nothing and answers JSON, and form values that carry JSON (as Slack's and
Telegram's clients post them)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Served:
    """A stand-in whose `server` serves on `thread` (both made by its __init__) inside `with`."""

    server: ThreadingHTTPServer
    thread: threading.Thread

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """Logs nothing (a test's output stays its own); reads a request's body whole, answers JSON."""

    def log_message(self, *args):
        pass

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def maybe_json(value: str):
    """A form value that holds a JSON object or list, decoded; any other value as it is."""
    if value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
