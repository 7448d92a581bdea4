"""core.telemetry: the GenAI spans of a turn, the approval.wait span of every decision in the trace
that asked, the metrics, content kept out unless asked for, and nothing at all when it is off.
The SDK's in-memory exporter and reader stand in for the OTLP collector (tests/e2e has the real one)."""
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from approvals.models import Approval, Rule
from approvals.services import decide, expire_overdue
from chat.models import ToolCall
from core import telemetry
from tests.conftest import pending_approvals, start_conversation as start
from tests.standins.fake_openai import fake_openai  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


class Recorded:
    def __init__(self, exporter: InMemorySpanExporter, reader: InMemoryMetricReader):
        self.exporter, self.reader = exporter, reader

    def spans(self, name: str | None = None) -> list:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if s.name == name] if name else spans

    def points(self, metric: str) -> list:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else [])
            for scope in resource.scope_metrics
            for found in scope.metrics
            if found.name == metric
            for point in found.data.data_points
        ]


@pytest.fixture
def recorded(monkeypatch):
    """Telemetry on, into memory."""
    monkeypatch.delenv(telemetry.CAPTURE_CONTENT, raising=False)
    yield _install()
    telemetry.uninstall()


def _install() -> Recorded:
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.install(tracer_provider, MeterProvider(metric_readers=[reader]))
    return Recorded(exporter, reader)


def all_attribute_text(spans) -> str:
    return json.dumps([dict(span.attributes) for span in spans], default=str)


def test_a_turn_is_one_invoke_agent_span_with_its_model_and_tool_calls_inside(recorded, alice, agent):
    start(alice, agent, "what is (2 + 3) * 4")

    [invoke] = recorded.spans(f"invoke_agent {agent.name}")
    assert invoke.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert invoke.attributes["gen_ai.agent.name"] == agent.name
    # "scripted/demo": litellm's routing prefix is the provider, the rest is the model.
    assert (invoke.attributes["gen_ai.provider.name"], invoke.attributes["gen_ai.request.model"]) == ("scripted", "demo")
    chats = recorded.spans("chat demo")
    [tool] = recorded.spans("execute_tool calculator")
    assert len(chats) == 2  # the call, then the answer that reads its result
    for chat in chats:
        assert (chat.attributes["gen_ai.provider.name"], chat.attributes["gen_ai.request.model"]) == ("scripted", "demo")
        assert chat.attributes["gen_ai.conversation.id"] == invoke.attributes["gen_ai.conversation.id"]
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.id"] == ToolCall.objects.get().call_id
    for child in [*chats, tool]:
        assert child.context.trace_id == invoke.context.trace_id and child.parent.span_id == invoke.context.span_id
    assert recorded.points("hitl.tool.duration")[0].attributes == {"gen_ai.tool.name": "calculator"}
    durations = recorded.points("gen_ai.client.operation.duration")
    assert sum(point.count for point in durations) == 2
    assert all("gen_ai.conversation.id" not in point.attributes for point in durations)  # a span's, never a metric's


@pytest.mark.parametrize(("model", "provider", "requested"), [
    ("openai/gpt-4o-mini", "openai", "gpt-4o-mini"), ("gpt-4o", "openai", "gpt-4o"),
    ("bedrock/anthropic.claude-3-5-sonnet", "aws.bedrock", "anthropic.claude-3-5-sonnet"), ("gemini/gemini-1.5-pro", "gcp.gemini", "gemini-1.5-pro"),
    ("vertex_ai/gemini-1.5-pro", "gcp.vertex_ai", "gemini-1.5-pro"), ("azure/my-deployment", "azure.ai.openai", "my-deployment"),
    ("mistral/mistral-large", "mistral_ai", "mistral-large"), ("claude-3-5-sonnet-20240620", "anthropic", "claude-3-5-sonnet-20240620"),
    ("xai/grok-2", "x_ai", "grok-2"), ("ollama/llama3", "ollama", "llama3"), ("my-model", "_OTHER", "my-model"),
])
def test_the_provider_is_the_conventions_well_known_name_and_the_model_loses_its_routing_prefix(model, provider, requested):
    assert telemetry.provider_and_model(model) == (provider, requested)


def test_a_decided_approval_is_an_approval_wait_span_in_the_trace_that_asked_it(recorded, alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    [invoke] = recorded.spans(f"invoke_agent {agent.name}")
    assert approval.trace_context["traceparent"].split("-")[1] == format(invoke.context.trace_id, "032x")

    decide(approval.pk, user=alice, approve=True, via="api", shown_hash="")

    approval.refresh_from_db()
    [wait] = recorded.spans("approval.wait")
    assert wait.context.trace_id == invoke.context.trace_id and wait.parent.span_id == invoke.context.span_id
    assert dict(wait.attributes) | {"hitl.conversation.id": ""} == {
        "hitl.approval.id": approval.pk, "hitl.approval.kind": "action", "hitl.approval.risk": approval.risk,
        "hitl.approval.decision": "approved", "hitl.approval.decided_via": "api", "hitl.conversation.id": "",
        "hitl.approval.tool.name": "write_file", "hitl.approval.tool.call.id": approval.tool_call.call_id,
    }
    assert wait.start_time == int(approval.requested_at.timestamp() * 1e9)
    assert wait.end_time == int(approval.decided_at.timestamp() * 1e9)
    # The resumed run (eager here) is a second invoke_agent; the file was written.
    assert len(recorded.spans(f"invoke_agent {agent.name}")) == 2
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED


def test_approvals_are_counted_requested_decided_pending_and_timed(recorded, alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    assert [p.value for p in recorded.points("hitl.approvals.pending")] == [2]

    decide(first.pk, user=alice, approve=False, via="chat", reason="keep it", shown_hash="")

    assert sum(p.value for p in recorded.points("hitl.approvals.requested")) == 2
    [decided] = recorded.points("hitl.approvals.decided")
    assert (decided.value, decided.attributes["hitl.approval.decision"], decided.attributes["hitl.approval.decided_via"]) == (1, "rejected", "chat")
    [waited] = recorded.points("hitl.approval.time_to_decision")
    assert waited.count == 1 and waited.attributes["hitl.approval.decision"] == "rejected"
    assert [p.value for p in recorded.points("hitl.approvals.pending")] == [1]


def test_expiry_and_rules_end_the_wait_too(recorded, alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    expire_overdue()
    allow = Rule.objects.create(effect="allow", tool="write_file", scope=Rule.Scope.GLOBAL, created_by=alice)
    start(alice, agent, "write hi to a.txt")

    expired, by_rule = recorded.spans("approval.wait")
    assert (expired.attributes["hitl.approval.decision"], expired.attributes["hitl.approval.decided_via"]) == ("expired", "timeout")
    assert (by_rule.attributes["hitl.approval.decision"], by_rule.attributes["hitl.approval.decided_via"]) == ("approved", "rule")
    assert by_rule.attributes["hitl.approval.rule_id"] == allow.pk
    assert "hitl.approval.rule_id" not in expired.attributes


def test_arguments_previews_and_results_stay_out_of_telemetry_unless_asked_for(recorded, alice, agent):
    conversation = start(alice, agent, "write secret-words to notes.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, approve=True, via="api", shown_hash="")

    spans = recorded.spans()
    assert {"execute_tool write_file", "approval.wait"} <= {span.name for span in spans}
    assert "secret-words" not in all_attribute_text(spans)
    assert not any(key in span.attributes for span in spans for key in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "hitl.approval.preview"))


def test_with_content_capture_the_arguments_results_and_preview_are_on_the_spans(monkeypatch, alice, agent):
    monkeypatch.setenv(telemetry.CAPTURE_CONTENT, "1")
    recorded = _install()
    try:
        conversation = start(alice, agent, "write secret-words to notes.txt")
        [approval] = pending_approvals(conversation)
        decide(approval.pk, user=alice, approve=True, via="api", shown_hash="")
    finally:
        telemetry.uninstall()

    [tool] = recorded.spans("execute_tool write_file")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"path": "notes.txt", "content": "secret-words"}
    assert "Wrote 12 bytes" in tool.attributes["gen_ai.tool.call.result"]
    [wait] = recorded.spans("approval.wait")
    assert "secret-words" in wait.attributes["hitl.approval.preview"]
    [asked, *_] = recorded.spans("chat demo")
    [message] = json.loads(asked.attributes["gen_ai.output.messages"])
    assert message["parts"][-1]["name"] == "write_file" and "secret-words" in message["parts"][-1]["arguments"]


def test_token_counts_come_from_the_provider_when_it_reports_them(recorded, alice, agent, fake_openai):  # noqa: F811
    agent.model, agent.api_base = "openai/gpt-4o-mini", fake_openai.base_url
    agent.save()
    fake_openai.respond_with_text("Hello there.")

    start(alice, agent, "hi")

    [chat] = recorded.spans("chat gpt-4o-mini")
    assert (chat.attributes["gen_ai.usage.input_tokens"], chat.attributes["gen_ai.usage.output_tokens"]) == (10, 5)
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert fake_openai.requests[-1]["stream_options"] == {"include_usage": True}


def test_off_the_provider_is_not_asked_for_token_counts(alice, agent, fake_openai):  # noqa: F811
    agent.model, agent.api_base = "openai/gpt-4o-mini", fake_openai.base_url
    agent.save()
    fake_openai.respond_with_text("Hello there.")

    start(alice, agent, "hi")

    assert "stream_options" not in fake_openai.requests[-1]


def test_a_failed_tool_is_an_error_span_and_a_stopped_model_call_is_not(recorded, alice, agent):
    start(alice, agent, "read missing.txt")

    [tool] = recorded.spans("execute_tool read_file")
    assert tool.status.status_code.name == "ERROR" and tool.attributes["error.type"] == "ToolError"
    assert all(span.status.status_code.name != "ERROR" for span in recorded.spans() if span.name.startswith("chat "))


def test_the_resumed_run_is_enqueued_in_the_trace_that_asked(recorded, alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)

    with telemetry.resuming([approval], conversation.pk):
        inside = telemetry.trace_context()

    assert inside["traceparent"].split("-")[1] == approval.trace_context["traceparent"].split("-")[1]
    assert telemetry.trace_context() == {}  # detached after


def test_a_garbled_stored_trace_context_still_decides_and_starts_a_trace_of_its_own(recorded, alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(trace_context={"traceparent": "00-zz-not-a-trace", "x": ["y"]})

    decide(approval.pk, user=alice, approve=True, via="api", shown_hash="")

    approval.refresh_from_db()
    assert approval.status == "approved"
    [wait] = recorded.spans("approval.wait")
    assert wait.parent is None and wait.attributes["hitl.approval.id"] == approval.pk


def test_off_an_approval_stores_no_trace_context(alice, agent):
    assert not telemetry.is_on()
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    assert approval.trace_context == {}


def test_off_setup_installs_nothing_and_loads_no_sdk():
    """Without OTEL_EXPORTER_OTLP_ENDPOINT (or with OTEL_SDK_DISABLED=true): no provider, no SDK module, the ASGI app unwrapped, and a
    turn's helpers are the one shared no-op (in a fresh process: this one has the SDK loaded)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | {"DJANGO_SETTINGS_MODULE": "tests.settings"}
    script = (
        "import django, sys; django.setup()\n"
        "from core import telemetry\n"
        "from opentelemetry import trace\n"
        "app = object()\n"
        "assert telemetry.setup(web=True) is False and not telemetry.is_on()\n"
        "import os; os.environ.update(OTEL_EXPORTER_OTLP_ENDPOINT='http://127.0.0.1:9', OTEL_SDK_DISABLED='true')\n"
        "assert telemetry.setup(web=True) is False and not telemetry.is_on()\n"
        "assert telemetry.traced_http(app) is app\n"
        "assert telemetry.agent_invocation('x') is telemetry.OFF and telemetry.tool_execution('t', 'c') is telemetry.OFF\n"
        "assert telemetry.trace_context() == {}\n"
        "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'\n"
        "assert not [m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.instrumentation'))]\n"
        "print('off')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "off", done.stderr


def test_on_setup_installs_the_sdk_and_the_instrumentations_once():
    """With OTEL_EXPORTER_OTLP_ENDPOINT (in a fresh process: providers are set once per process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | {
        "DJANGO_SETTINGS_MODULE": "tests.settings", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SERVICE_NAME": "hitl-test",
    }
    script = (
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from core import telemetry\n"
        "from opentelemetry import trace\n"
        "assert telemetry.setup(web=True) and telemetry.setup(web=True) and telemetry.is_on()\n"
        "provider = trace.get_tracer_provider()\n"
        "assert type(provider).__module__.startswith('opentelemetry.sdk')\n"
        "assert provider.resource.attributes['service.name'] == 'hitl-test'\n"
        "assert settings.MIDDLEWARE.count('opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware') == 1\n"
        "assert type(telemetry.traced_http(object())).__name__ == 'OpenTelemetryMiddleware'\n"
        "print('on')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "on", done.stderr


def test_the_service_is_named_hitl_unless_the_operator_names_it_and_each_process_is_an_instance(monkeypatch):
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    first, second = telemetry._resource(), telemetry._resource()
    assert first.attributes["service.name"] == "hitl"
    assert first.attributes["service.instance.id"] != second.attributes["service.instance.id"]
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=approvals,deployment.environment.name=prod")
    assert telemetry._resource().attributes["service.name"] == "approvals"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "hitl-eu")
    named = telemetry._resource().attributes
    assert (named["service.name"], named["deployment.environment.name"]) == ("hitl-eu", "prod")


def test_the_time_to_decision_is_bucketed_in_seconds_up_to_a_day(recorded, alice, agent):
    conversation = start(alice, agent, "write hello to notes.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(requested_at=timezone.now() - timedelta(minutes=3))
    decide(approval.pk, user=alice, approve=True, via="api", shown_hash="")

    [waited] = recorded.points("hitl.approval.time_to_decision")
    assert list(waited.explicit_bounds) == telemetry.DECISION_SECONDS
    assert waited.bucket_counts[telemetry.DECISION_SECONDS.index(300)] == 1  # 180 s: in (120, 300]
    [wait] = recorded.spans("approval.wait")
    assert (wait.end_time - wait.start_time) / 1e9 >= 180
