"""The litellm adapter: `complete()` streams one model turn into a plain ModelTurn.

Also the offline **scripted model**, a litellm custom provider (`scripted/<anything>`) that turns a
few plain phrases into real tool calls and answers tool results in words. See the README.
"""
import functools
import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.conf import settings

from approvals import questions

from hitl import telemetry
from hitl.inputs import storable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelToolCall:
    call_id: str
    name: str
    raw_arguments: str


@dataclass(frozen=True)
class ModelTurn:
    text: str
    tool_calls: list[ModelToolCall] = field(default_factory=list)
    input_tokens: int | None = None  # as the provider reported them, if it did (hitl.telemetry)
    output_tokens: int | None = None


class LLMError(Exception):
    """A model call that failed for good; the message is written for the user."""


class Stopped(Exception):
    """Raised by `on_delta` to end a streamed answer nobody wants any more (the run was stopped)."""


_importing = threading.Lock()


@functools.cache
def litellm_module():
    """Import litellm once per process, on first use.

    The import takes seconds and much memory; web processes never call a model, so only workers
    pay for it (they warm it up when they start, see chat.tasks).
    """
    with _importing:  # a threads pool's first turns may all arrive at once: one import, one setup
        return _import_litellm()


@functools.cache
def _import_litellm():
    import litellm

    class ScriptedModel(litellm.CustomLLM):
        """The provider behind `scripted/...` model strings."""

        def streaming(self, model, messages, *args, optional_params=None, **kwargs):
            return scripted_stream(model, messages, optional_params or {})

    litellm.suppress_debug_info = True
    # After each streamed call litellm would run its success logging in a thread with an event loop
    # of its own, for callbacks; the app configures none (a deployment adding some sets it back).
    litellm.disable_streaming_logging = True
    litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": ScriptedModel()}]
    return litellm


def complete(
    *,
    model: str,
    messages: list[dict],
    tools: list[dict],
    api_base: str = "",
    on_delta: Callable[[str], None] = lambda text: None,
    on_restart: Callable[[], None] = lambda: None,
) -> ModelTurn:
    """Call the model with streaming; retry rate limits, connection errors and 5xx with backoff."""
    litellm = litellm_module()
    transient = (
        litellm.RateLimitError,
        litellm.APIConnectionError,
        litellm.Timeout,
        litellm.InternalServerError,
        litellm.ServiceUnavailableError,
    )
    attempts = settings.HITL_LLM_RETRIES + 1
    for attempt in range(1, attempts + 1):
        try:
            with telemetry.model_call(model, not_errors=(Stopped,)) as call:
                return call.returned(_stream_turn(litellm, model, messages, tools, api_base, on_delta))
        except transient as exc:
            logger.warning("model call failed (attempt %s of %s): %r", attempt, attempts, exc)
            if attempt == attempts:
                raise LLMError(_describe(litellm, exc, attempts)) from exc
            on_restart()
            time.sleep(settings.HITL_LLM_RETRY_BACKOFF * 2 ** (attempt - 1))
        except Stopped:
            raise
        except Exception as exc:  # any other provider error ends the run with a readable message
            logger.warning("model call failed: %r", exc)
            raise LLMError(_describe(litellm, exc, attempt)) from exc
    raise AssertionError("unreachable")


def _stream_turn(litellm, model, messages, tools, api_base, on_delta) -> ModelTurn:
    kwargs = {"tools": tools} if tools else {}
    if api_base:
        kwargs["api_base"] = api_base
    if telemetry.is_on() and _reports_usage(litellm, model):
        kwargs["stream_options"] = {"include_usage": True}  # the token counts of the model call's span
    # max_retries=0: the provider SDK would otherwise retry underneath us, tripling the attempts
    # (and the time a hanging provider can hold the conversation).
    response = litellm.completion(
        model=model, messages=messages, stream=True, timeout=settings.HITL_LLM_TIMEOUT, max_retries=0, **kwargs
    )
    turn = _TurnBuilder(on_delta)
    try:
        raw = getattr(response, "completion_stream", None)
        if isinstance(raw, _openai_stream_class()):
            _read_openai_events(response, raw, turn)
        else:
            _read_litellm_chunks(response, turn)
    finally:
        _disarm_finalizer(response)
    return turn.result()


@functools.cache
def _reports_usage(litellm, model: str) -> bool:
    """Whether the provider takes `stream_options` (asked for only then: others refuse it)."""
    try:
        return "stream_options" in (litellm.get_supported_openai_params(model=model) or ())
    except Exception:
        return False


@functools.cache
def _openai_stream_class() -> type:
    import openai

    return openai.Stream


def _read_litellm_chunks(response, turn: "_TurnBuilder") -> None:
    """Any provider: litellm's wrapper turns its chunks into OpenAI-shaped ones."""
    counting = telemetry.is_on()  # token counts are read only for telemetry: no cost per chunk otherwise
    for chunk in response:
        if counting:
            turn.add_usage(getattr(chunk, "usage", None))
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        turn.add_text(delta.content)
        for fragment in delta.tool_calls or []:
            function = fragment.function
            turn.add_call_piece(fragment.index, fragment.id, function and function.name, function and function.arguments)


def _read_openai_events(response, raw, turn: "_TurnBuilder") -> None:
    """The thin path for OpenAI-compatible providers (OpenAI itself, and any `openai/…` model with
    an `api_base`): read the stream's events as the provider sent them, as plain JSON. litellm's
    wrapper would rebuild every chunk into its own type, keep them all, and at the end rebuild the
    whole response for logging and cost the app does not use; the OpenAI SDK would first build a
    typed object of every chunk. Together about two thirds of a short answer's CPU in a worker, and
    more the longer the answer (docs/BENCHMARKS.md, issue 24). litellm still makes the request and
    maps its errors, and an error met mid-stream is mapped by litellm's wrapper as its own
    iteration would. The events come from the SDK's own decoder (`Stream._iter_events`, private:
    tests/test_llm.py fails if an upgrade moves it)."""
    events = _openai_event_data(raw)
    try:
        while True:
            try:
                data = next(events)
            except StopIteration:
                return
            except Exception as exc:  # the provider's error, never ours (on_delta's)
                response._handle_stream_fallback_error(exc)
            choices = data.get("choices") if isinstance(data, dict) else None
            if not choices or not isinstance(choices[0], dict):
                turn.add_usage(data.get("usage") if isinstance(data, dict) else None)
                continue  # a usage chunk, or one of the provider's own
            delta = choices[0].get("delta") or {}
            turn.add_text(delta.get("content"))
            for fragment in delta.get("tool_calls") or []:
                function = fragment.get("function") or {}
                turn.add_call_piece(fragment.get("index"), fragment.get("id"), function.get("name"), function.get("arguments"))
    finally:
        raw.close()  # an answer stopped half-way drops its connection rather than read the rest


def _openai_event_data(raw) -> Iterator:
    """Each event's JSON until `[DONE]`; an error event raises, as the SDK's own iteration does."""
    import openai

    for event in raw._iter_events():
        if event.data.startswith("[DONE]"):
            return
        data = event.json()
        if isinstance(data, dict) and data.get("error"):
            error = data["error"]
            message = error.get("message") if isinstance(error, dict) else None
            raise openai.APIError(
                message=message if isinstance(message, str) and message else "An error occurred during streaming",
                request=raw.response.request,
                body=error,
            )
        yield data


class _TurnBuilder:
    """Adds up a streamed answer's pieces into a turn, showing the text as it comes."""

    def __init__(self, on_delta: Callable[[str], None]):
        self.on_delta = on_delta
        self.text_parts: list[str] = []
        self.calls: dict[int, dict] = {}
        self.usage: tuple[int | None, int | None] = (None, None)

    def add_usage(self, usage) -> None:
        """A usage chunk's token counts (an object or, read raw, a dict), when the provider sends one."""
        read = usage.get if isinstance(usage, dict) else lambda name: getattr(usage, name, None)
        counts = (read("prompt_tokens"), read("completion_tokens")) if usage else (None, None)
        if all(isinstance(count, int) for count in counts):
            self.usage = counts

    def add_text(self, text) -> None:
        if text and isinstance(text, str):
            self.text_parts.append(text)
            self.on_delta(text)

    def add_call_piece(self, index, call_id, name, arguments) -> None:
        """Providers send a call's id and name once and its arguments in pieces, keyed by index."""
        call = self.calls.setdefault(index if isinstance(index, int) else 0, {"id": "", "name": "", "arguments": ""})
        call["id"] = call_id if call_id and isinstance(call_id, str) else call["id"]
        call["name"] = name if name and isinstance(name, str) else call["name"]
        call["arguments"] += arguments if isinstance(arguments, str) else ""

    def result(self) -> ModelTurn:
        # NULs and lone surrogates go: no database column (PostgreSQL's least of all) stores them.
        return ModelTurn(
            text=storable("".join(self.text_parts)),
            tool_calls=[
                ModelToolCall(
                    call_id=storable(c["id"] or f"call_{i}"),
                    name=storable(c["name"]),
                    raw_arguments=storable(c["arguments"]),
                )
                for i, c in sorted(self.calls.items())
            ],
            input_tokens=self.usage[0],
            output_tokens=self.usage[1],
        )


def _disarm_finalizer(stream) -> None:
    """litellm's stream wrapper sets two ContextVars in its __del__, and it sits in reference cycles,
    so the cyclic GC finalizes it at any moment: possibly in the middle of another ContextVar.set in
    the same thread (asgiref and asyncio set them on every push). Before Python 3.12 that re-entrant
    set is a use-after-free in CPython's HAMT (python/cpython#148891), which crashed a test run
    with a segfault in asgiref. Without its logging object the finalizer does nothing; the stream is
    done with it by now (its end-of-stream logging, if any, holds its own reference)."""
    if hasattr(stream, "logging_obj"):
        stream.logging_obj = None


def _describe(litellm, exc: Exception, attempts: int) -> str:
    tries = f" (tried {attempts} times)" if attempts > 1 else ""
    if isinstance(exc, litellm.RateLimitError):
        return f"The model provider is rate-limiting requests{tries}. Try again in a moment."
    if isinstance(exc, litellm.Timeout):
        return f"The model did not answer within {settings.HITL_LLM_TIMEOUT:g} s{tries}."
    # litellm reports a refused connection as an InternalServerError saying "Connection error".
    if isinstance(exc, litellm.APIConnectionError) or "Connection error" in str(exc):
        return f"Could not reach the model provider{tries}."
    if isinstance(exc, (litellm.InternalServerError, litellm.ServiceUnavailableError)):
        return f"The model provider had an internal error{tries}."
    if isinstance(exc, litellm.AuthenticationError):
        return "The model provider refused the credentials (check the API key)."
    # litellm prefixes its messages with the exception's names ("litellm.NotFoundError: NotFoundError: ").
    message = re.sub(r"^(litellm\.)?(\w+Error: )+", "", str(getattr(exc, "message", exc)))[:300]
    return f"The model call failed ({exc.__class__.__name__}): {message}"


# ---------------------------------------------------------------------------------------------
# The scripted model

SCRIPTED_REQUESTS: deque = deque(maxlen=100)  # what the scripted model was sent, newest last

# The phrases a newcomer can click on a scripted agent's pages.
SUGGESTIONS = [
    "write hello to notes.txt",
    "delete notes.txt and todo.txt",
    "email bob@example.com about lunch",
    "what is (2 + 3) * 4",
    "list files",
    "read notes.txt",
    "ask me to choose between tea, coffee and water",
    "plan a tidy-up of the notes",
]

HELP = (
    "I'm the offline scripted model. Try: \"write hello to notes.txt\", \"read notes.txt\", "
    "\"list files\", \"delete a.txt and b.txt\", \"delete all files\", \"email bob@example.com about lunch\", "
    "\"what is 2 + 2\", \"ask me what to call the file\", "
    "\"ask me to choose between tea, coffee and water\", \"ask me for a number between 1 and 10\", "
    "\"ask me for a date\" or \"plan a tidy-up\"."
)


def script_turn(messages: list[dict]) -> ModelTurn:
    """The scripted model's whole behaviour: deterministic, from the messages after its last turn."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    calls_by_id = {c["id"]: c for c in (messages[last].get("tool_calls") or [])} if last >= 0 else {}
    tail = messages[last + 1 :]
    sentences = [_result_sentence(calls_by_id.get(m.get("tool_call_id")), m["content"]) for m in tail if m["role"] == "tool"]
    users = [m for m in tail if m["role"] == "user"]
    planned = None
    if users:
        planned = _plan(str(users[-1]["content"]).strip(), _repository(messages))
        if planned is None:
            sentences.append(HELP)
    elif follow_up := _follow_up(messages, calls_by_id, tail):
        planned = [follow_up]
    turn_number = sum(1 for m in messages if m["role"] == "assistant")
    tool_calls = [
        ModelToolCall(call_id=f"call_{turn_number}_{i}", name=name, raw_arguments=raw) for i, (name, raw) in enumerate(planned or [])
    ]
    return ModelTurn(text=" ".join(sentences), tool_calls=tool_calls)


def _repository(messages: list[dict]) -> str:
    """The git repository the system prompt names ("The git repository is at <path>."), as a real
    model would read it; else the working directory."""
    system = next((str(m["content"]) for m in messages if m["role"] == "system"), "")
    found = re.search(r"git repository is at (\S+?)\.?(?:\s|$)", system)
    return found[1] if found else "."


def _follow_up(messages: list[dict], calls_by_id: dict, tail: list[dict]) -> tuple[str, str] | None:
    """The second step of `commit all with message <m>`: once git_add succeeded, the commit."""
    last_user = next((str(m["content"]).strip() for m in reversed(messages) if m["role"] == "user"), "")
    wanted = re.fullmatch(r"commit all with message (.+)", last_user.rstrip(".!"), re.I | re.S)
    added = [m for m in tail if m["role"] == "tool" and (calls_by_id.get(m.get("tool_call_id")) or {}).get("function", {}).get("name") == "git__git_add"]
    if not (wanted and added) or str(added[-1]["content"]).startswith(("Error:", "Rejected by", "Denied by rule", "Already rejected by", "Not run:", "Cancelled by", "Interrupted:")):
        return None
    return ("git__git_commit", json.dumps({"repo_path": _repository(messages), "message": wanted[1]}))


def _plan(text: str, repository: str = ".") -> list[tuple[str, str]] | None:
    """Turn one user phrase into tool calls (name, JSON arguments), or None for a plain reply."""
    text = text.rstrip(".!").strip()
    args = lambda **kw: json.dumps(kw)  # noqa: E731
    if git := _git_call(text, repository):  # the demo git tool server (mcp-server-git)
        return [git]
    if m := re.fullmatch(r"call (\w+) with (.*)", text, re.I | re.S):  # raw calls, to show bad model output
        return [(m[1], m[2])]
    if asked := _question(text):
        return [("ask_human", json.dumps(asked))]
    if m := re.fullmatch(r"plan (.+)", text, re.I | re.S):
        steps = [
            {"action": f"Gather what {m[1]} needs", "description": "Read the files and notes involved.", "optional": False},
            {"action": "Tell bob@example.com", "description": "Send a short email about it.", "optional": True},
            {"action": f"Do it: {m[1]}", "description": "Make the change.", "optional": False},
        ]
        return [("propose_plan", args(title=m[1], steps=steps))]
    if notes := _notes_call(text):  # the demo notes tool server's tools (toolservers.demo_server)
        return [notes]
    if m := re.fullmatch(r"write (.+) to (\S+)", text, re.I | re.S):
        return [("write_file", args(path=m[2], content=m[1]))]
    if m := re.fullmatch(r"read (\S+)", text, re.I):
        return [("read_file", args(path=m[1]))]
    if re.fullmatch(r"list( the)? files", text, re.I):
        return [("list_directory", args(path="."))]
    if re.fullmatch(r"delete (all|every) files?", text, re.I):
        return [("delete_all_files", args())]
    if m := re.fullmatch(r"delete (.+)", text, re.I):
        names = [n.strip() for n in re.split(r",|\band\b", m[1]) if n.strip()]
        return [("delete_file", args(path=n)) for n in names]
    if m := re.fullmatch(r"email (\S+) about (.+)", text, re.I | re.S):
        return [("send_email", args(to=m[1], subject=m[2], body=f"Hello, this is about {m[2]}."))]
    if m := re.fullmatch(r"what is (.+?)\??", text, re.I):
        return [("calculator", args(expression=m[1]))]
    if m := re.fullmatch(r"fetch (\S+)", text, re.I):
        return [("web_fetch", args(url=m[1]))]
    return None


def _git_call(text: str, repository: str) -> tuple[str, str] | None:
    """`git status`, `git log`, `git diff`, `create branch <name>`, and the first step of `commit all
    with message <m>` (git_add; the commit follows once it succeeded)."""
    if re.fullmatch(r"git status", text, re.I):
        return ("git__git_status", json.dumps({"repo_path": repository}))
    if re.fullmatch(r"git log", text, re.I):
        return ("git__git_log", json.dumps({"repo_path": repository, "max_count": 5}))
    if re.fullmatch(r"git diff", text, re.I):
        return ("git__git_diff_unstaged", json.dumps({"repo_path": repository}))
    if m := re.fullmatch(r"create branch (\S+)", text, re.I):
        return ("git__git_create_branch", json.dumps({"repo_path": repository, "branch_name": m[1]}))
    if re.fullmatch(r"commit all with message (.+)", text, re.I | re.S):
        return ("git__git_add", json.dumps({"repo_path": repository, "files": ["."]}))
    return None


def _notes_call(text: str) -> tuple[str, str] | None:
    """`list my notes`, `read note <name>`, `note <text> as <name>`, `remove note <name>`, `break the
    notes`, `show the notes picture`, `a huge note`: calls of the `notes` tool server's tools."""
    if re.fullmatch(r"list (my|the) notes", text, re.I):
        return ("notes__list_notes", "{}")
    if m := re.fullmatch(r"read note (\S+)", text, re.I):
        return ("notes__read_note", json.dumps({"name": m[1]}))
    if m := re.fullmatch(r"note (.+) as (\S+)", text, re.I | re.S):
        return ("notes__write_note", json.dumps({"name": m[2], "text": m[1]}))
    if m := re.fullmatch(r"remove note (\S+)", text, re.I):
        return ("notes__delete_note", json.dumps({"name": m[1]}))
    if m := re.fullmatch(r"title note (\S+)", text, re.I):
        return ("notes__title_note", json.dumps({"name": m[1]}))
    if re.fullmatch(r"break the notes", text, re.I):
        return ("notes__fail", json.dumps({"message": "broken on purpose"}))
    if re.fullmatch(r"show the notes picture", text, re.I):
        return ("notes__picture", "{}")
    if re.fullmatch(r"a huge note", text, re.I):
        return ("notes__huge", json.dumps({"size": 100_000}))
    return None


def _question(text: str) -> dict | None:
    """The ask_human arguments a phrase asks for: `ask me to choose between a, b and c`, `ask me
    for a number between m and n`, `ask me for a date`, `ask me <question>`."""
    if m := re.fullmatch(r"ask me to choose between (.+)", text, re.I | re.S):
        options = [o.strip() for o in re.split(r",|\bor\b|\band\b", m[1]) if o.strip()]
        return {"question": "Which one?", "type": "choice", "options": options}
    if m := re.fullmatch(r"ask me for a number between (-?[\d.]+) and (-?[\d.]+)", text, re.I):
        return {"question": f"Which number, from {m[1]} to {m[2]}?", "type": "number", "min": float(m[1]), "max": float(m[2])}
    if re.fullmatch(r"ask me for a date", text, re.I):
        return {"question": "Which date?", "type": "date"}
    if m := re.fullmatch(r"ask me (.+)", text, re.I | re.S):
        return {"question": m[1].strip(), "type": "text"}
    return None


_ACTIONS = {
    "write_file": "write {path}",
    "read_file": "read {path}",
    "delete_file": "delete {path}",
    "delete_all_files": "delete all files",
    "list_directory": "list the files",
    "send_email": "email {to} about {subject}",
    "calculator": "calculate {expression}",
    "web_fetch": "fetch {url}",
    "git__git_status": "look at the git status",
    "git__git_log": "read the git log",
    "git__git_diff_unstaged": "look at the changes",
    "git__git_add": "stage the changes",
    "git__git_commit": "commit with message {message}",
    "git__git_create_branch": "create branch {branch_name}",
    "notes__list_notes": "list the notes",
    "notes__read_note": "read note {name}",
    "notes__write_note": "write note {name}",
    "notes__delete_note": "remove note {name}",
    "notes__title_note": "title note {name}",
    "notes__fail": "break the notes",
    "notes__picture": "show the picture",
    "notes__huge": "make a huge note",
}


def _describe_call(call: dict | None) -> str:
    if not call:
        return "run that tool"
    name = call["function"]["name"]
    try:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        return _ACTIONS[name].format(**arguments)
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):  # bad or missing arguments, unknown tool
        return f"run {name}"


def _result_sentence(call: dict | None, content: str) -> str:
    if call and call["function"]["name"] in ("ask_human", "request_human_input", "propose_plan"):
        return _answer_sentence(content)
    action = _describe_call(call)
    if content.startswith(("Rejected by", "Denied by rule", "Already rejected by", "Not run:", "Interrupted:", "Cancelled by")):
        end = "" if content.endswith((".", "!", "?")) else "."  # the reason is quoted as it was typed
        return f"I did not {action} ({content}){end}"
    if content.startswith("Error:"):
        return f"I could not {action}: {content.removeprefix('Error:').strip()}"
    return f"I did {action}: {content.strip()}"


def _answer_sentence(content: str) -> str:
    """What the scripted model says of a question's answer or a plan's decision (their first line is JSON)."""
    try:
        outcome = json.loads(content.split("\n", 1)[0])
    except ValueError:
        return f"I got: {content.strip()}"
    if "answer" in outcome:
        return f"You answered: {questions.shown(outcome['answer'])}."
    if outcome.get("declined"):
        return f"You declined to answer ({outcome.get('reason') or 'no reason given'})."
    if outcome.get("approved_steps"):
        return f"Approved steps: {', '.join(str(i) for i in outcome['approved_steps'])}."
    if outcome.get("rejected"):
        return f"You rejected the plan ({outcome.get('reason') or 'no reason given'}): I will not follow it."
    return "No answer came, so I will not go on with that."


def _chunk(text: str = "", tool_use: dict | None = None, finish_reason: str = "", index: int = 0) -> dict:
    return {
        "text": text,
        "tool_use": tool_use,
        "is_finished": bool(finish_reason),
        "finish_reason": finish_reason,
        "usage": None,
        "index": index,
    }


def scripted_stream(model: str, messages: list, optional_params: dict) -> Iterator[dict]:
    """The scripted turn as litellm's generic streaming chunks: words first, then the tool calls."""
    SCRIPTED_REQUESTS.append({"model": model, "messages": messages, "tools": optional_params.get("tools")})
    turn = script_turn(messages)
    for word in re.findall(r"\S+\s*", turn.text):
        yield _chunk(text=word)
    for index, call in enumerate(turn.tool_calls):
        function = {"name": call.name, "arguments": call.raw_arguments}
        yield _chunk(tool_use={"id": call.call_id, "type": "function", "index": index, "function": function})
    yield _chunk(finish_reason="tool_calls" if turn.tool_calls else "stop")
