"""A local OpenAI-compatible chat-completions server that answers after a set latency, at a set token
rate, and holds thousands of requests at once cheaply (one asyncio loop, stdlib only), so the
benchmarks measure how many conversations a stack keeps waiting on a slow model, not the model.

    python bench/model_server.py --latency 2 --tokens-per-second 50 --port 8901

(`GET /stats` then gives {"requests", "in_flight", "peak_in_flight"}; `POST /stats` gives them and
starts counting afresh) or, from Python (a test, the bench):

    server = ModelServer(latency=2.0, tokens_per_second=50).start()
    litellm.completion(model="openai/gpt-4o-mini", api_base=server.base_url, api_key="test", ...)
    server.stop()

`POST /v1/chat/completions`, streamed (Server-Sent Events, as OpenAI sends them, ending in
`data: [DONE]`) when the request says `stream: true`, one JSON object otherwise. What it answers,
from the request's messages:

- the last message is a tool result → "Done: <the first 80 characters of that result>";
- the last user message starts with "write " ("write hi to a3.txt") and the request offers a
  `write_file` tool → one `write_file` call with {"path": <the message's last word>, "content": "hi"};
- anything else → a short sentence of about twenty words.

The latency is the time before the first byte of the answer (its headers included). With
`tokens_per_second` > 0 the rest follows one piece (a word, or a few characters of a call's
arguments) per 1/tokens_per_second; a non-streamed answer is sent whole when a streamed one would
have ended. HTTP/1.1 with keep-alive (chunked streams), as httpx and the `openai` client expect.
"""
import argparse
import asyncio
import json
import re
import signal
import threading
import time
import uuid

COMPLETIONS_PATH = "/v1/chat/completions"
MODEL = "gpt-4o-mini"
ARGUMENT_PIECE_CHARS = 7  # characters of a call's arguments per streamed chunk
TEXT = ("Here is a short answer from the benchmark model server, about twenty words long, "
        "so that streaming it takes a little while.")
MAX_BODY = 64 * 1024 * 1024
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large"}


class ModelServer:
    """The server, run by its own event loop in a daemon thread. Counters are read from any thread."""

    def __init__(self, latency: float = 2.0, tokens_per_second: float = 0.0, port: int = 0):
        self.latency = latency
        self.tokens_per_second = tokens_per_second
        self.port = port
        self.requests = 0  # answered so far
        self.in_flight = 0
        self.peak_in_flight = 0  # most requests in flight at once
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task] = set()
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def base_url(self) -> str:
        """What to pass as `api_base` / `base_url` (clients append `/chat/completions`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict:
        return {"requests": self.requests, "in_flight": self.in_flight, "peak_in_flight": self.peak_in_flight}

    def reset_stats(self) -> None:
        """Count afresh from now (the requests still in flight count towards the new peak)."""
        self.requests, self.peak_in_flight = 0, self.in_flight

    # --- Lifecycle ------------------------------------------------------------------------------

    def start(self) -> "ModelServer":
        self._thread = threading.Thread(target=self._run, name="model-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"the model server did not start: {self._error!r}") from self._error
        if self._server is None:
            raise RuntimeError("the model server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            # A deep backlog: a thousand clients connecting in the same instant must not be refused.
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._connection, "127.0.0.1", self.port, backlog=4096, reuse_address=True)
            )
            self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _shutdown(self) -> None:
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    # --- HTTP -----------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # the client went away or spoke nonsense: the connection ends
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read and answer one request; True if the connection stays open for another."""
        line = await reader.readline()
        if not line:
            return False
        method, target, version = line.decode("latin-1").strip().split(" ", 2)
        headers = {}
        while True:
            header = await reader.readline()
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await _read_body(reader, headers)
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        path = target.split("?", 1)[0].rstrip("/")
        if body is None:
            await _send_json(writer, 413, _error("The request body is too large."), keep_alive=False)
            return False
        if path == "/stats":  # for a benchmark driving a server in another process (the CLI)
            if method == "POST":
                self.reset_stats()
            await _send_json(writer, 200, self.stats(), keep_alive=keep_alive)
            return keep_alive
        if method == "GET" and path == "/v1/models":
            await _send_json(writer, 200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "bench"}]},
                             keep_alive=keep_alive)
            return keep_alive
        if path != COMPLETIONS_PATH:
            await _send_json(writer, 404, _error(f"This server answers only POST {COMPLETIONS_PATH}."), keep_alive=keep_alive)
            return keep_alive
        if method != "POST":
            await _send_json(writer, 405, _error("Use POST."), keep_alive=keep_alive)
            return keep_alive
        try:
            request = json.loads(body or b"{}")
            messages = request["messages"]
        except (ValueError, KeyError, TypeError):
            await _send_json(writer, 400, _error("The body is not a JSON object with `messages`."), keep_alive=keep_alive)
            return keep_alive
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            answer = answer_for(messages, request.get("tools") or [])
            if request.get("stream"):
                await self._stream(writer, answer, request, keep_alive)
            else:
                await asyncio.sleep(self.latency + self._generation_seconds(answer))
                await _send_json(writer, 200, whole_completion(answer, request.get("model") or MODEL), keep_alive=keep_alive)
            self.requests += 1
        finally:
            self.in_flight -= 1
        return keep_alive

    def _generation_seconds(self, answer: "Answer") -> float:
        if self.tokens_per_second <= 0:
            return 0.0
        return max(0, len(list(chunks(answer))) - 2) / self.tokens_per_second

    async def _stream(self, writer: asyncio.StreamWriter, answer: "Answer", request: dict, keep_alive: bool) -> None:
        await asyncio.sleep(self.latency)
        head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream; charset=utf-8", "Cache-Control: no-cache",
                "Connection: keep-alive" if keep_alive else "Connection: close"]
        if keep_alive:
            head.append("Transfer-Encoding: chunked")  # the stream's end is the zero chunk, not the socket's
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        completion_id = f"chatcmpl-bench{uuid.uuid4().hex[:20]}"
        created = int(time.time())
        model = request.get("model") or MODEL
        pace = 1 / self.tokens_per_second if self.tokens_per_second > 0 else 0.0

        async def event(payload) -> None:
            data = b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(data), data) if keep_alive else data)
            await writer.drain()

        for i, (delta, finish_reason) in enumerate(chunks(answer)):
            # The role chunk goes with the first piece; each later piece (a word, an argument piece)
            # waits its turn at the token rate. The final, empty chunk follows the last piece at once.
            if pace and i > 1 and finish_reason is None:
                await asyncio.sleep(pace)
            await event({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                         "system_fingerprint": "fp_bench",
                         "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]})
        if (request.get("stream_options") or {}).get("include_usage"):
            await event({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [], "usage": usage(answer)})
        await event(b"[DONE]")
        if keep_alive:
            writer.write(b"0\r\n\r\n")
            await writer.drain()


# --- What it answers ----------------------------------------------------------------------------------


class Answer:
    def __init__(self, text: str = "", calls: list[tuple[str, str, str]] | None = None):
        self.text = text
        self.calls = calls or []  # (call id, name, JSON arguments)

    @property
    def pieces(self) -> list[str]:
        return re.findall(r"\S+\s*|\s+", self.text)


def answer_for(messages: list[dict], tools: list[dict]) -> Answer:
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return Answer(f"Done: {_text(last.get('content'))[:80]}")
    users = [m for m in messages if m.get("role") == "user"]
    said = _text(users[-1].get("content")).strip() if users else ""
    offered = {(t.get("function") or {}).get("name") for t in tools if isinstance(t, dict)}
    if said.lower().startswith("write ") and "write_file" in offered:
        arguments = json.dumps({"path": said.split()[-1], "content": "hi"})
        return Answer(calls=[(f"call_{uuid.uuid4().hex[:24]}", "write_file", arguments)])
    return Answer(TEXT)


def _text(content) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def chunks(answer: Answer):
    """The deltas OpenAI streams, as (delta, finish_reason): the role, the text a word at a time,
    each call (its id, type and name with empty arguments, then the arguments in pieces carrying
    only the index), then an empty delta with the finish reason (no usage)."""
    yield {"role": "assistant", "content": ""}, None
    for piece in answer.pieces:
        yield {"content": piece}, None
    for index, (call_id, name, raw) in enumerate(answer.calls):
        yield {"tool_calls": [{"index": index, "id": call_id, "type": "function",
                               "function": {"name": name, "arguments": ""}}]}, None
        for start in range(0, len(raw), ARGUMENT_PIECE_CHARS):
            yield {"tool_calls": [{"index": index, "function": {"arguments": raw[start:start + ARGUMENT_PIECE_CHARS]}}]}, None
    yield {}, "tool_calls" if answer.calls else "stop"


def usage(answer: Answer) -> dict:
    completion = max(1, len(answer.pieces) + sum(len(raw) // 4 for _, _, raw in answer.calls))
    return {"prompt_tokens": 20, "completion_tokens": completion, "total_tokens": 20 + completion}


def whole_completion(answer: Answer, model: str) -> dict:
    message = {"role": "assistant", "content": answer.text or None}
    if answer.calls:
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}
                                 for call_id, name, raw in answer.calls]
    return {
        "id": f"chatcmpl-bench{uuid.uuid4().hex[:20]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_bench",
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": "tool_calls" if answer.calls else "stop"}],
        "usage": usage(answer),
    }


# --- HTTP helpers -------------------------------------------------------------------------------------


async def _read_body(reader: asyncio.StreamReader, headers: dict) -> bytes | None:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readline()).split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body)
            if len(body) + size > MAX_BODY:
                return None
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    length = int(headers.get("content-length") or 0)
    if length > MAX_BODY:
        return None
    return await reader.readexactly(length) if length else b""


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


async def _send_json(writer: asyncio.StreamWriter, status: int, payload: dict, *, keep_alive: bool) -> None:
    data = json.dumps(payload).encode()
    head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
    writer.write(head.encode() + data)
    await writer.drain()


def main() -> None:
    parser = argparse.ArgumentParser(description="A local OpenAI-compatible chat-completions server for the benchmarks.")
    parser.add_argument("--latency", type=float, default=2.0, help="seconds before the first byte of each answer (default 2)")
    parser.add_argument("--tokens-per-second", type=float, default=0.0, help="then stream at this rate (default 0: all at once)")
    parser.add_argument("--port", type=int, default=8901)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped by a benchmark: say what it served
    server = ModelServer(latency=args.latency, tokens_per_second=args.tokens_per_second, port=args.port).start()
    print(f"serving {server.base_url} (latency {args.latency:g} s, {args.tokens_per_second:g} tokens/s); Ctrl-C stops",
          flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print(f"answered {server.requests} requests, at most {server.peak_in_flight} at once", flush=True)


if __name__ == "__main__":
    main()
