"""OpenTelemetry for operators: traces and metrics of turns, model calls, tool calls and the waits
for humans, exported by OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, and off otherwise.

Off, every helper here returns at once (a shared no-op, an empty dict): the SDK is never imported
and a step pays a few attribute checks. On, `setup()` installs the SDK's providers and the Django,
ASGI and Celery instrumentations, which carry one trace from a web request through the Celery tasks
it enqueues (the context travels in the task's headers). Spans follow the GenAI semantic
conventions: `invoke_agent <agent>` per run of the loop, `chat <model>` per model call,
`execute_tool <tool>` per tool call; `approval.wait` spans an approval from its request to its
decision, parented on the trace context stored with the approval (`Approval.trace_context`), so a
decision made hours later, on any surface, joins the trace of the step that asked. Arguments,
results, previews and reasons stay out unless `HITL_OTEL_CAPTURE_CONTENT=1`; decision tokens in a
URL are always masked (core.masking).
"""
import contextvars
import json
import logging
import os
import time
import uuid
from contextlib import contextmanager

from django.db import transaction

from core import masking

logger = logging.getLogger(__name__)

SCOPE = "hitl"
CAPTURE_CONTENT = "HITL_OTEL_CAPTURE_CONTENT"
MAX_CONTENT = 4000  # characters of an argument list or a result kept on a span, when content is captured

_tracer = None  # set by install(): None means off, and every helper below returns at once
_metrics = None
_capture = False


def is_on() -> bool:
    return _tracer is not None


def setup(*, web: bool = False) -> bool:
    """Turn telemetry on in this process if `OTEL_EXPORTER_OTLP_ENDPOINT` is set: the SDK's
    providers exporting by OTLP/HTTP (the exporters read the standard OTEL_* variables), the Celery
    instrumentation and, for `web`, Django's. Call it once per process, where it will run: before
    Django loads its middleware (hitl.asgi), and in each process that runs tasks, after any fork
    (hitl.celery), since the exporters' threads do not survive one. Returns whether it is on."""
    if _tracer is not None or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return is_on()
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":  # the standard off switch wins
        return False
    from opentelemetry import metrics, trace
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = _resource()
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    install(tracer_provider, meter_provider)
    CeleryInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    if web:
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        # A decision token in a URL (an email's /approve/<token>/) never reaches a span: the hook
        # masks the name and URL attributes (http.target, http.url...) once the span has them.
        DjangoInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider, request_hook=masking.mask_span)
    logger.info("OpenTelemetry on: exporting to %s as %s", os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"], resource.attributes.get("service.name"))
    return True


def _resource():
    """The standard resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME), named "hitl" unless
    the operator named it, and one instance id per process: each worker process and daphne sends
    its own cumulative metrics, which a backend must not mistake for one stream."""
    from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource

    detected = Resource.create()
    ours = {SERVICE_INSTANCE_ID: uuid.uuid4().hex}
    if str(detected.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        ours[SERVICE_NAME] = "hitl"
    return detected.merge(Resource(ours))


def install(tracer_provider, meter_provider) -> None:
    """Use these providers from now on (setup()'s, or a test's in-memory ones)."""
    global _tracer, _metrics, _capture
    _tracer = tracer_provider.get_tracer(SCOPE)
    _metrics = _Metrics(meter_provider.get_meter(SCOPE))
    _capture = os.environ.get(CAPTURE_CONTENT, "") == "1"


def uninstall() -> None:
    """Off again (tests)."""
    global _tracer, _metrics, _capture
    _tracer = _metrics = None
    _capture = False


def traced_http(app):
    """The ASGI app with a server span per HTTP request (the ASGI instrumentation), for the apps
    mounted beside Django too (A2A, MCP, AG-UI); Django's own span nests inside it. Off: `app`."""
    if _tracer is None:
        return app
    from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware  # under daphne, Django's own instrumentation needs it
    # No span per ASGI message: a stream (SSE, a long poll) would send hundreds.
    # Its span's name is the path ("GET /approve/<token>/"): the hook masks decision tokens in it and in its URL attributes.
    return OpenTelemetryMiddleware(app, exclude_spans=["receive", "send"], server_request_hook=masking.mask_span)


# Bucket boundaries for the histograms: the GenAI conventions' for model calls and tokens; for a
# human's decision, seconds to a day (the SDK's default buckets are milliseconds' up to 10,000).
CALL_SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
DECISION_SECONDS = [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400]


class _Metrics:
    def __init__(self, meter):
        self.requested = meter.create_counter("hitl.approvals.requested", unit="{approval}", description="Approvals requested")
        self.decided = meter.create_counter(
            "hitl.approvals.decided", unit="{approval}", description="Approvals decided, by decision (hitl.approval.decision) and surface (hitl.approval.decided_via)"
        )
        self.time_to_decision = meter.create_histogram(
            "hitl.approval.time_to_decision", unit="s", description="From an approval's request to its decision",
            explicit_bucket_boundaries_advisory=DECISION_SECONDS,
        )
        meter.create_observable_gauge(
            "hitl.approvals.pending", callbacks=[_observe_pending], unit="{approval}", description="Approvals waiting for a decision now"
        )
        self.model_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model calls (GenAI semantic conventions)",
            explicit_bucket_boundaries_advisory=CALL_SECONDS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens per model call, where the provider reports them",
            explicit_bucket_boundaries_advisory=TOKENS,
        )
        self.tool_duration = meter.create_histogram(
            "hitl.tool.duration", unit="s", description="Tool runs", explicit_bucket_boundaries_advisory=CALL_SECONDS
        )


def _observe_pending(options):
    """The number of pending approvals, read from the database at each export (the rows are the truth:
    a count kept in memory would start again at each restart)."""
    from django.apps import apps
    from django.db import connection
    from opentelemetry.metrics import Observation

    try:
        pending = apps.get_model("approvals", "Approval").objects.filter(status="pending").count()
    except Exception:  # a database that is away now: no observation this time
        logger.warning("could not count pending approvals", exc_info=True)
        return []
    finally:
        if not connection.in_atomic_block:  # the exporter's own thread: give its connection back
            connection.close()
    return [Observation(pending)]


class _Off:
    """What every helper returns when telemetry is off: one shared object that does nothing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def returned(self, value):
        return value


OFF = _Off()


# --- Spans around the loop's work --------------------------------------------------------------


# The conversation of the `invoke_agent` span this thread is in: its model calls' spans carry it too.
_conversation: contextvars.ContextVar = contextvars.ContextVar("hitl_telemetry_conversation", default=None)


def agent_invocation(conversation_id):
    """`invoke_agent` around one run of the loop (a task's advance()); named for its agent by
    name_agent() once the step has read the conversation."""
    if _tracer is None:
        return OFF
    return _invocation(str(conversation_id))


@contextmanager
def _invocation(conversation_id: str):
    token = _conversation.set(conversation_id)
    try:
        with _span("invoke_agent", {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": conversation_id}) as span:
            yield span
    finally:
        _conversation.reset(token)


# litellm's routing prefixes ("bedrock/…") as the GenAI conventions' well-known gen_ai.provider.name
# values; a prefix not listed is its own name.
PROVIDERS = {
    "openai": "openai", "text-completion-openai": "openai", "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference",
    "anthropic": "anthropic", "bedrock": "aws.bedrock", "gemini": "gcp.gemini", "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai", "cohere": "cohere", "cohere_chat": "cohere", "deepseek": "deepseek", "groq": "groq",
    "watsonx": "ibm.watsonx.ai", "mistral": "mistral_ai", "perplexity": "perplexity", "xai": "x_ai",
}
# A model named without a prefix, as litellm routes it by its name.
BY_NAME = (
    ("gpt-", "openai"), ("chatgpt", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("claude", "anthropic"),
    ("gemini", "gcp.gemini"), ("mistral", "mistral_ai"), ("command", "cohere"), ("deepseek", "deepseek"), ("grok", "x_ai"),
)


def provider_and_model(model: str) -> tuple[str, str]:
    """(gen_ai.provider.name, gen_ai.request.model) of a litellm model string: "bedrock/anthropic.claude-3"
    is ("aws.bedrock", "anthropic.claude-3"); "gpt-4o" is ("openai", "gpt-4o"). "_OTHER" when no
    provider can be told from the name."""
    prefix, slash, rest = model.partition("/")
    if slash and rest:
        return PROVIDERS.get(prefix, prefix), rest
    return next((provider for start, provider in BY_NAME if model.startswith(start)), "_OTHER"), model


def name_agent(name: str, agent_id: str = "", model: str = "") -> None:
    """Name the current `invoke_agent` span for its agent, with its provider and model."""
    if _tracer is None:
        return
    from opentelemetry import trace

    span = trace.get_current_span()
    if span.is_recording() and getattr(span, "name", "").startswith("invoke_agent"):
        span.update_name(f"invoke_agent {name}")
        span.set_attribute("gen_ai.agent.name", name)
        if agent_id:
            span.set_attribute("gen_ai.agent.id", agent_id)
        if model:
            provider, requested = provider_and_model(model)
            span.set_attribute("gen_ai.provider.name", provider)
            span.set_attribute("gen_ai.request.model", requested)


def model_call(model: str, *, not_errors: tuple = ()):
    """`chat <model>` around one model call: `.returned(turn)` records its token counts (and, with
    content captured, its text and calls). Exceptions in `not_errors` (a stop) are no failure."""
    if _tracer is None:
        return OFF
    provider, requested = provider_and_model(model)
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider, "gen_ai.request.model": requested}
    if (conversation_id := _conversation.get()) is not None:
        attributes["gen_ai.conversation.id"] = conversation_id
    # The metrics keep to what the conventions measure by: a conversation's id is a span's alone.
    measured = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
    return _Timed(f"chat {requested}", attributes, _metrics.model_duration, not_errors, kind="client", metric_keys=measured)


def tool_execution(name: str, call_id: str, arguments=None, *, not_errors: tuple = ()):
    """`execute_tool <tool>` around one tool run: `.returned(output)` records its result when
    content is captured. Exceptions in `not_errors` (a tool asking for input) are no failure."""
    if _tracer is None:
        return OFF
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"}
    if _capture and arguments is not None:
        attributes["gen_ai.tool.call.arguments"] = _content(arguments)
    return _Timed(f"execute_tool {name}", attributes, _metrics.tool_duration, not_errors, metric_keys=("gen_ai.tool.name",))


@contextmanager
def _span(name: str, attributes: dict):
    with _tracer.start_as_current_span(name, attributes=attributes) as span:
        yield span


class _Timed:
    """A span that is also a duration in a histogram, with error.type on both when it fails."""

    def __init__(self, name, attributes, histogram, not_errors, *, kind: str = "internal", metric_keys=None):
        self.name, self.attributes, self.histogram, self.not_errors = name, attributes, histogram, not_errors
        self.kind, self.metric_keys = kind, metric_keys
        self.span = None

    def __enter__(self):
        from opentelemetry import trace

        kind = trace.SpanKind.CLIENT if self.kind == "client" else trace.SpanKind.INTERNAL
        self._activation = _tracer.start_as_current_span(self.name, kind=kind, attributes=self.attributes, record_exception=False)
        self.span = self._activation.__enter__()
        self.started = time.perf_counter()
        return self

    def _measured(self) -> dict:
        return {key: self.attributes[key] for key in (self.metric_keys or self.attributes) if key in self.attributes}

    def __exit__(self, kind, exc, tb) -> bool:
        measured = self._measured()
        if exc is not None and not isinstance(exc, self.not_errors):
            from opentelemetry.trace import Status, StatusCode

            measured["error.type"] = kind.__qualname__
            self.span.set_attribute("error.type", kind.__qualname__)
            self.span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
        elif exc is not None:
            self.span.set_attribute("hitl.outcome", kind.__qualname__)
        self.histogram.record(time.perf_counter() - self.started, measured)
        self._activation.__exit__(None, None, None)
        return False

    def returned(self, value):
        usage = {"input": getattr(value, "input_tokens", None), "output": getattr(value, "output_tokens", None)}
        for token_type, count in usage.items():
            if count is not None:
                self.span.set_attribute(f"gen_ai.usage.{token_type}_tokens", count)
                _metrics.tokens.record(count, {**self._measured(), "gen_ai.token.type": token_type})
        if _capture:
            self.span.set_attribute("gen_ai.tool.call.result" if "gen_ai.tool.name" in self.attributes else "gen_ai.output.messages", _output(value))
        return value


def _content(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[:MAX_CONTENT]


def _output(value) -> str:
    """A tool's output, or a model turn as the GenAI conventions' output messages."""
    if hasattr(value, "tool_calls") and hasattr(value, "text"):
        parts = [{"type": "text", "content": value.text}] if value.text else []
        parts += [{"type": "tool_call", "id": c.call_id, "name": c.name, "arguments": c.raw_arguments} for c in value.tool_calls]
        return _content([{"role": "assistant", "parts": parts}])
    return _content(str(value))


# --- Approvals: the wait for a human -----------------------------------------------------------


def trace_context() -> dict:
    """The current trace context as W3C headers (traceparent, tracestate), to store with an approval
    requested now; {} when off or outside any trace."""
    if _tracer is None:
        return {}
    from opentelemetry.propagate import inject

    carrier: dict = {}
    inject(carrier)
    return carrier


def approval_requested(approval) -> None:
    """Count a requested approval once its transaction commits (a turn rolled back asked nothing)."""
    if _tracer is None:
        return
    attributes = {"hitl.approval.risk": approval.risk, "hitl.approval.kind": approval.kind}
    transaction.on_commit(lambda: _metrics.requested.add(1, attributes), robust=True)


def approvals_decided(approvals) -> None:
    """Called in the deciding transaction (approvals.services, every decision, expiry and rule):
    once it commits, each approval's `approval.wait` span and its metrics."""
    if _tracer is None:
        return
    transaction.on_commit(lambda: [_record_decision(approval) for approval in approvals], robust=True)


def _record_decision(approval) -> None:
    """The `approval.wait` span, from requested_at to decided_at, in the trace of the step that asked
    (its stored context), linked to the trace of whatever decided it (a request, the expiry sweep)."""
    from opentelemetry import trace
    from opentelemetry.propagate import extract

    deciding = trace.get_current_span().get_span_context()
    attributes = {
        "hitl.approval.id": approval.pk,
        "hitl.approval.kind": approval.kind,
        "hitl.approval.risk": approval.risk,
        "hitl.approval.decision": approval.status,
        "hitl.approval.decided_via": approval.decided_via or "",
        "hitl.conversation.id": str(approval.conversation_id),
    }
    if approval.rule_id is not None:
        attributes["hitl.approval.rule_id"] = approval.rule_id
    if type(approval).tool_call.is_cached(approval):  # never a query for a name
        attributes["hitl.approval.tool.name"] = approval.tool_call.name
        attributes["hitl.approval.tool.call.id"] = approval.tool_call.call_id
    if _capture:
        if approval.preview:
            attributes["hitl.approval.preview"] = _content(approval.preview.get("text", "") if isinstance(approval.preview, dict) else approval.preview)
        if approval.rejection_reason:
            attributes["hitl.approval.rejection_reason"] = _content(approval.rejection_reason)
    span = _tracer.start_span(
        "approval.wait",
        context=extract(approval.trace_context or {}),
        start_time=_nanoseconds(approval.requested_at),
        links=[trace.Link(deciding)] if deciding.is_valid else None,
        attributes=attributes,
    )
    span.end(end_time=_nanoseconds(approval.decided_at))
    measured = {key: attributes[key] for key in ("hitl.approval.decision", "hitl.approval.decided_via", "hitl.approval.risk", "hitl.approval.kind")}
    _metrics.decided.add(1, measured)
    _metrics.time_to_decision.record(max((approval.decided_at - approval.requested_at).total_seconds(), 0.0), measured)


def _nanoseconds(moment) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def resuming(approvals, conversation_id):
    """Around enqueuing the task that resumes a conversation after its decisions: that task joins
    the trace of the step that asked (the first stored context among the conversation's approvals)."""
    if _tracer is None:
        return OFF
    stored = next((a.trace_context for a in approvals if a.conversation_id == conversation_id and a.trace_context), None)
    return _attached(stored) if stored else OFF


@contextmanager
def _attached(carrier: dict):
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(carrier))
    try:
        yield
    finally:
        context.detach(token)
