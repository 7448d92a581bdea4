"""The litellm adapter: `complete()` streams one model turn into a plain ModelTurn. The offline
scripted model (chat.scripted) is registered here as litellm's `scripted` provider."""
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.conf import settings

from core import telemetry
from core.inputs import storable

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
    input_tokens: int | None = None  # as the provider reported them, if it did (core.telemetry)
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
            from chat.scripted import scripted_stream

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
    tests/chat/test_llm.py fails if an upgrade moves it)."""
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
