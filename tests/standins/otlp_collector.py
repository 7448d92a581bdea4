"""A local stand-in for an OpenTelemetry collector's OTLP/HTTP receiver, for tests of core.telemetry.

It serves `POST /v1/traces` and `POST /v1/metrics` (protobuf, gzip or not, as the SDK's exporters
send them), decodes each request with `opentelemetry.proto` and keeps what it received: spans as
plain `Span` records, metric names with their data points. Point `OTEL_EXPORTER_OTLP_ENDPOINT` at
`collector.endpoint`.
"""
import gzip
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest, ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

from tests.standins.serving import QuietHandler

MAX_BODY = 20 * 1024 * 1024


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict
    start_ns: int
    end_ns: int
    service: str
    links: tuple[str, ...]  # the span ids it links to


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind in ("string_value", "bool_value", "int_value", "double_value") else str(any_value)


def _attributes(key_values) -> dict:
    return {kv.key: _value(kv.value) for kv in key_values}


class Collector:
    def __init__(self):
        self.spans: list[Span] = []
        self.metrics: dict[str, list] = {}  # metric name → its data points' attribute dicts with values
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "Collector":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans_named(self, name: str) -> list[Span]:
        with self.lock:
            return [span for span in self.spans if span.name == name]

    def trace(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def _receive_traces(self, body: bytes) -> bytes:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        received = []
        for resource_spans in request.resource_spans:
            service = _attributes(resource_spans.resource.attributes).get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(Span(
                        name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(), kind=span.kind, attributes=_attributes(span.attributes),
                        start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano, service=service,
                        links=tuple(link.span_id.hex() for link in span.links),
                    ))
        with self.lock:
            self.spans.extend(received)
        return ExportTraceServiceResponse().SerializeToString()

    def _receive_metrics(self, body: bytes) -> bytes:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        data = getattr(metric, metric.WhichOneof("data"))
                        points = self.metrics.setdefault(metric.name, [])
                        for point in data.data_points:
                            value = point.count if hasattr(point, "count") and metric.WhichOneof("data") == "histogram" else (
                                point.as_int if point.WhichOneof("value") == "as_int" else point.as_double
                            )
                            points.append({**_attributes(point.attributes), "_value": value})
        return ExportMetricsServiceResponse().SerializeToString()

    def _handler(self):
        collector = self

        class Receiver(QuietHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    self.send_error(413)
                    return
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receive = {"/v1/traces": collector._receive_traces, "/v1/metrics": collector._receive_metrics}.get(self.path)
                if receive is None:
                    self.send_error(404)
                    return
                answer = receive(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        return Receiver
