"""OpenTelemetry on the real processes: a daphne and a Celery worker of their own (the session's
stack stays off), with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a local OTLP/HTTP stand-in collector
(tests/standins/otlp_collector.py), on the shared database and redis-server (a Redis database of their own,
so the session's worker never takes their tasks). A message posted through the API to a gated call,
then decided: one trace holds the POST's server span, the Celery tasks that ran the loop before and
after the decision, the turn's GenAI spans and the approval.wait span; the metrics arrive too."""

import httpx
import pytest

from tests.conftest import wait_until
from tests.e2e.conftest import BIN, Api, free_port, port_open, start as start_process
from tests.e2e.chat.test_api_e2e import wait_for_pending, wait_for_status
from tests.standins.otlp_collector import Collector

pytestmark = pytest.mark.e2e
SERVER = 2  # SpanKind.SERVER in OTLP


@pytest.fixture(scope="module")
def traced(stack):
    """The collector, and a daphne and a worker that export to it."""
    collector = Collector().start()
    env = stack.env | {
        "REDIS_URL": stack.redis_url.rsplit("/", 1)[0] + "/1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds: spans leave at once, not after 5 s
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }
    port = free_port()
    worker = start_process(
        "traced-worker",
        [str(BIN / "celery"), "-A", "hitl", "worker", "--loglevel", "INFO", "--concurrency", "4",
         "--without-mingle", "--without-gossip", "--hostname", "traced@%h"],
        env,
        stack.work,
    )
    web = start_process("traced-web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"], env, stack.work)
    try:
        wait_until(lambda: port_open(port), timeout=30, message="the traced daphne")
        wait_until(lambda: "ready." in worker.log.read_text(), timeout=60, message="the traced worker")
        yield collector, f"http://127.0.0.1:{port}"
    except BaseException:
        print(web.tail(), worker.tail())
        raise
    finally:
        web.stop()
        worker.stop()
        collector.stop()




def test_a_decided_gated_call_is_one_trace_from_the_post_to_its_approval_wait(e2e, traced, alice, agent):
    collector, base_url = traced
    # Tracing changes no answer: no token is still 401, garbage to a mounted app still a 4xx.
    assert httpx.get(f"{base_url}/api/approvals").status_code == 401
    assert 400 <= httpx.post(f"{base_url}/a2a/demo/", content=b"\xff not json").status_code < 500
    api = Api(base_url, alice)
    # A client's garbled trace headers are ignored: the trace starts at our server span.
    garbled = {"traceparent": "00-not-a-trace-id-01", "tracestate": "k=" + "v" * 2000}
    response = api.http.post("conversations", json={"agent": "demo", "message": "write hello to traced.txt"}, headers=garbled)
    assert response.status_code == 201, response.text
    conversation_id = response.json()["id"]
    [approval] = wait_for_pending(api, conversation_id, 1)
    assert api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"}).status_code == 200
    wait_for_status(conversation_id, "idle")
    api.http.close()

    def the_wait():
        return next((s for s in collector.spans_named("approval.wait") if s.attributes.get("hitl.approval.id") == approval["id"]), None)

    wait = wait_until(the_wait, timeout=10, message="the approval.wait span at the collector")
    assert (wait.attributes["hitl.approval.decision"], wait.attributes["hitl.approval.decided_via"]) == ("approved", "api")
    assert wait.attributes["hitl.approval.risk"] == approval["risk"] and wait.service == "hitl"
    assert "hello" not in str(wait.attributes)  # no content unless HITL_OTEL_CAPTURE_CONTENT=1

    # The run resumed after the decision continues the trace: its task's span and its tool's are in
    # it (each process exports on its own schedule: wait for both runs).
    def both_runs():
        names = [span.name for span in collector.trace(wait.trace_id)]
        return names.count("run/chat.tasks.advance_conversation") == 2 and "execute_tool write_file" in names

    wait_until(both_runs, timeout=10, message="the resumed run's spans in the trace that asked")
    spans = collector.trace(wait.trace_id)
    names = [span.name for span in spans]
    assert names.count("apply_async/chat.tasks.advance_conversation") == 2
    invokes = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert len(invokes) == 2 and all(s.attributes["gen_ai.conversation.id"] == conversation_id for s in invokes)
    assert sum(name.startswith("chat ") for name in names) == 2
    by_id = {span.span_id: span for span in spans}
    assert by_id[wait.parent_span_id].name.startswith("invoke_agent ")  # parented on the step that asked
    [link] = wait.links  # and linked to the decision's own trace
    [root] = [span for span in spans if not span.parent_span_id]
    assert root.kind == SERVER and root.name.startswith("POST") and root.service == "hitl"
    deciding = _root_of(collector, link)
    assert deciding.kind == SERVER and deciding.name.startswith("POST") and deciding.trace_id != wait.trace_id

    for metric in ("hitl.approvals.requested", "hitl.approvals.decided", "hitl.approval.time_to_decision", "hitl.approvals.pending",
                   "gen_ai.client.operation.duration", "hitl.tool.duration"):
        wait_until(lambda: collector.metrics.get(metric), timeout=10, message=f"{metric} at the collector")
    assert any(p.get("hitl.approval.decision") == "approved" and p.get("hitl.approval.decided_via") == "api" for p in collector.metrics["hitl.approvals.decided"])


def _root_of(collector, span_id: str):
    """The first span of the trace `span_id` is in, as far as the collector has it."""
    wait_until(lambda: any(s.span_id == span_id for s in collector.spans), timeout=10, message="the linked span")
    by_id = {span.span_id: span for span in collector.spans}
    span = by_id[span_id]
    while span.parent_span_id in by_id:
        span = by_id[span.parent_span_id]
    return span
