"""A local stand-in for the OpenAI chat-completions API, for tests that go through litellm's real
OpenAI provider (`openai/...` models with `api_base` set to `server.base_url`).

It serves `POST /v1/chat/completions` from a queue of scripted responses, streamed as Server-Sent
Events the way OpenAI streams them when the request says `stream: true`, and records every request
body it received in `server.requests`. Use the `fake_openai` fixture: import it into a test module
(`from tests.standins.fake_openai import fake_openai`) and queue answers before the code calls the model:

    fake_openai.respond_with_tool_calls([("delete_file", {"path": "a.txt"})])
    fake_openai.respond_with_text("Done.")

A request that finds the queue empty gets a 400 that says so (not retried, so it fails fast).
"""
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

COMPLETIONS_PATH = "/v1/chat/completions"
ARGUMENT_PIECE_CHARS = 7  # how many characters of a call's arguments each chunk carries

ERROR_TYPES = {
    400: ("invalid_request_error", "Bad request."),
    401: ("invalid_request_error", "Incorrect API key provided."),
    429: ("rate_limit_error", "Rate limit reached for requests."),
    500: ("server_error", "The server had an error while processing your request."),
    503: ("server_error", "The engine is currently overloaded."),
}


@dataclass(frozen=True)
class _Answer:
    kind: str  # "text", "tool_calls", "status", "hang" or "broken" (an error event after the pieces)
    pieces: tuple[str, ...] = ()
    calls: tuple[tuple[str, str, str], ...] = ()  # (call id, name, raw JSON arguments)
    status: int = 200
    seconds: float = 0.0
    error: str = ""


class FakeOpenAI:
    """The server and its script. Start it with `start()`, stop it with `stop()` (the fixture does)."""

    def __init__(self, model: str = "gpt-4o-mini"):
        self.model = model
        self._answers: deque[_Answer] = deque()
        self._requests: list[dict] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._calls_made = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- Lifecycle ------------------------------------------------------------------------------

    def start(self) -> "FakeOpenAI":
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: a free one
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes any handler still hanging
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What to pass as `api_base` (litellm appends `/chat/completions`)."""
        return f"{self.url}/v1"

    # --- The script -----------------------------------------------------------------------------

    def respond_with_text(self, text: str, *, pieces: list[str] | None = None) -> None:
        """Answer with plain text, streamed one word (with its trailing space) per chunk unless
        `pieces` says how to split it."""
        pieces = pieces if pieces is not None else re.findall(r"\S+\s*|\s+", text)
        if "".join(pieces) != text:
            raise ValueError("the pieces must add up to the text")
        self._queue(_Answer("text", pieces=tuple(pieces)))

    def respond_with_tool_calls(self, calls: list[tuple], *, text: str = "") -> list[str]:
        """Answer with tool calls, each `(name, arguments)` or `(name, arguments, call_id)`; the
        arguments are a dict (sent as JSON) or a string (sent as it is, to script bad output).
        Returns the call ids, in order."""
        self._calls_made += 1
        scripted = []
        for i, call in enumerate(calls):
            name, arguments = call[0], call[1]
            call_id = call[2] if len(call) > 2 else f"call_fake_{self._calls_made}_{i}"
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            scripted.append((call_id, name, raw))
        pieces = tuple(re.findall(r"\S+\s*|\s+", text))
        self._queue(_Answer("tool_calls", pieces=pieces, calls=tuple(scripted)))
        return [call_id for call_id, _, _ in scripted]

    def respond_with_status(self, status: int, *, times: int = 1) -> None:
        """Answer with an OpenAI-style error body and this HTTP status, `times` requests in a row."""
        for _ in range(times):
            self._queue(_Answer("status", status=status))

    def respond_with_hang(self, seconds: float, *, times: int = 1) -> None:
        """Say nothing for `seconds` (not even headers), then answer "Sorry, I was slow." A client
        with a shorter timeout gives up first."""
        for _ in range(times):
            self._queue(_Answer("hang", pieces=("Sorry, ", "I ", "was ", "slow."), seconds=seconds))

    def respond_with_error_mid_stream(self, pieces: list[str], *, message: str = "The server had an error while processing your request.") -> None:
        """Stream `pieces` of text, then an error event instead of the end (as OpenAI reports a failure
        after the answer began), then close the stream."""
        self._queue(_Answer("broken", pieces=tuple(pieces), error=message))

    def clear(self) -> None:
        """Drop the scripted answers no request has taken yet."""
        with self._lock:
            self._answers.clear()

    @property
    def requests(self) -> list[dict]:
        """Every request body received so far, parsed, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def unanswered(self) -> int:
        """How many scripted answers no request has taken yet."""
        with self._lock:
            return len(self._answers)

    def _queue(self, answer: _Answer) -> None:
        with self._lock:
            self._answers.append(answer)

    def _take(self, body: dict) -> _Answer | None:
        with self._lock:
            self._requests.append(body)
            return self._answers.popleft() if self._answers else None


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.0"  # one request per connection; a streamed body ends when it closes

    def log_message(self, format, *args) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        try:
            self._answer()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to tell it

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != COMPLETIONS_PATH:
            self._send_error(404, "invalid_request_error", f"fake_openai serves only POST {COMPLETIONS_PATH}.")
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send_error(400, "invalid_request_error", "fake_openai: the request body is not JSON.")
            return
        answer = self.fake._take(body)
        if answer is None:
            self._send_error(400, "invalid_request_error", "fake_openai: no scripted response left for this request.")
            return
        if answer.kind == "status":
            error_type, message = ERROR_TYPES.get(answer.status, ("server_error", f"Error {answer.status}."))
            self._send_error(answer.status, error_type, message)
            return
        if answer.kind == "hang" and self.fake._stopping.wait(answer.seconds):
            return  # the server is shutting down
        chunks = list(_chunks(answer))
        if answer.kind == "broken":
            self._send_stream(chunks[:-1], body, error=answer.error)
            return
        if body.get("stream"):
            self._send_stream(chunks, body)
        else:
            self._send_json(200, _whole_completion(answer, self.fake.model))

    def _send_stream(self, deltas: list[tuple[dict, str | None]], body: dict, error: str = "") -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        completion_id = f"chatcmpl-fake{time.monotonic_ns()}"
        created = int(time.time())
        for delta, finish_reason in deltas:
            chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.fake.model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            self._send_event(chunk)
        if error:
            self._send_event({"error": {"message": error, "type": "server_error", "param": None, "code": None}})
            return
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            self._send_event(
                {"id": completion_id, "object": "chat.completion.chunk", "created": created,
                 "model": self.fake.model, "choices": [], "usage": usage}
            )
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _send_event(self, payload: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self.wfile.flush()

    def _send_error(self, status: int, error_type: str, message: str) -> None:
        code = "rate_limit_exceeded" if status == 429 else None
        payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
        # The OpenAI SDK under litellm retries errors on its own, waiting as long as this header says
        # (else 0.5 to 8 seconds): a millisecond keeps the tests fast.
        self._send_json(status, payload, headers={"retry-after-ms": "1"})

    def _send_json(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _chunks(answer: _Answer):
    """The deltas OpenAI would stream, as (delta, finish_reason): the role first, then the text,
    then each call (its id, type and name with empty arguments, then the arguments in pieces that
    carry only the index), then an empty delta with the finish reason."""
    yield {"role": "assistant", "content": ""}, None
    for piece in answer.pieces:
        yield {"content": piece}, None
    for index, (call_id, name, raw) in enumerate(answer.calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        yield {"tool_calls": [head]}, None
        size = max(ARGUMENT_PIECE_CHARS, len(raw) // 50)  # huge arguments in ~50 pieces, not thousands
        for start in range(0, len(raw), size):
            piece = raw[start : start + size]
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, None
    yield {}, "tool_calls" if answer.calls else "stop"


def _whole_completion(answer: _Answer, model: str) -> dict:
    """The same answer without streaming, as one `chat.completion` object."""
    message = {"role": "assistant", "content": "".join(answer.pieces) or None}
    if answer.calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}
            for call_id, name, raw in answer.calls
        ]
    return {
        "id": f"chatcmpl-fake{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if answer.calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture
def fake_openai(monkeypatch):
    """A running FakeOpenAI, stopped at teardown. Sets OPENAI_API_KEY, which litellm's OpenAI
    provider insists on even for a local server."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()
