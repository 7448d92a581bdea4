"""Decision tokens never leave the decision (core.masking): an email link's token is masked in the
spans the ASGI and Django instrumentations make of its request (name, http.target, http.url,
url.path, url.full...), in Django's log line for a refused request, and in daphne's access log.
The end-to-end proof (a real collector and daphne's own output) is in tests/e2e/channels/test_email_e2e.py."""
import io
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from daphne.access import AccessLogGenerator
from django.core import signing
from django.test import Client
from django.urls import URLResolver, get_resolver

from approvals import tokens
from core.masking import MaskTokens, mask

ROOT = Path(__file__).resolve().parents[2]
# Shaped as approvals.tokens signs (payload:timestamp:signature) but signed for something else, so
# the page refuses it (a 403 and its log line) without a database.
FOREIGN = signing.dumps({"t": 1, "n": "0" * 32}, salt="not-a-decision-token", compress=False)


def test_a_token_is_masked_in_a_path_a_url_and_a_query_and_nothing_else_changes():
    value = signing.dumps({"t": 12, "n": "ab" * 16}, salt=tokens.SALT, compress=False)

    assert mask(f"GET /approve/{value}/") == "GET /approve/<token>/"
    assert mask(f"https://hitl.example.org/approve/{value}/?decision=reject") == "https://hitl.example.org/approve/<token>/?decision=reject"
    assert mask(f"/push/reject/{value}/") == "/push/reject/<token>/"  # any route: the signed shape is masked too
    assert mask(f"/x/?token={value}&a=1") == "/x/?token=<token>&a=1"
    assert mask('"POST /telegram/webhook/Zx3-kq_9Ab/ HTTP/1.1" 200') == '"POST /telegram/webhook/<token>/ HTTP/1.1" 200'
    for unchanged in ("GET /api/approvals/12", "/conversations/cae39236-48ad-4905-b391-eb26e6394d2a/#tool-call-3", "12:03:45 UTC"):
        assert mask(unchanged) == unchanged


def test_spans_of_a_request_to_an_email_link_hold_no_token(tmp_path):
    """In a fresh process with OTEL_EXPORTER_OTLP_ENDPOINT set (providers are set once per process):
    the app as daphne serves it (hitl.asgi), its spans read from an in-memory exporter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | {
        "DJANGO_SETTINGS_MODULE": "tests.settings", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
    }
    script = f"""
import asyncio, json, os
import httpx
import hitl.asgi
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))

async def main():
    transport = httpx.ASGITransport(app=hitl.asgi.application)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return (await client.get("/approve/{FOREIGN}/?decision=reject")).status_code

status = asyncio.run(main())
spans = [{{"name": s.name, "attributes": dict(s.attributes)}} for s in exporter.get_finished_spans()]
print(json.dumps({{"status": status, "spans": spans}}))
os._exit(0)  # no final export to the address nobody listens on
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == 403
    names = [span["name"] for span in found["spans"]]
    assert "GET /approve/<token>/" in names and "GET approve/<str:token>/" in names  # the ASGI span and Django's
    server = next(span["attributes"] for span in found["spans"] if span["name"] == "GET /approve/<token>/")
    assert any(str(value).endswith("/approve/<token>/?decision=reject") for value in server.values())  # the URL, masked
    assert FOREIGN not in done.stdout and FOREIGN.split(":")[-1] not in done.stdout
    assert FOREIGN not in done.stderr  # Django's "Forbidden: /approve/…" line, masked


def test_djangos_line_for_a_refused_link_names_the_route_without_its_token(caplog, db):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert Client().get(f"/approve/{FOREIGN}/").status_code == 403

    assert "Forbidden: /approve/<token>/" in caplog.text and FOREIGN not in caplog.text


def test_daphnes_access_log_writes_the_path_with_its_token_masked():
    stream = io.StringIO()

    AccessLogGenerator(stream)("http", "complete", {"path": f"/approve/{FOREIGN}/?decision=reject", "status": 403, "method": "GET",
                                                    "client": "127.0.0.1:5000", "time_taken": 0.01, "size": 120})

    line = stream.getvalue()
    assert '"GET /approve/<token>/?decision=reject" 403 120' in line and FOREIGN not in line


@pytest.mark.parametrize("logger_name", ["approvals", "django.security.csrf"])
def test_our_own_lines_and_csrf_refusals_mask_a_token_too(caplog, logger_name):
    with caplog.at_level(logging.WARNING, logger=logger_name):
        logging.getLogger(logger_name).warning("Forbidden (CSRF cookie not set.): %s", f"/approve/{FOREIGN}/")

    assert "/approve/<token>/" in caplog.text and FOREIGN not in caplog.text


def test_every_route_with_a_token_in_its_path_is_masked_and_push_decides_with_it_in_the_body():
    """A new route with a token in its path needs masking too: today the email page and Django's
    password reset; push keeps its tokens in the POST's body (and the reject form's #fragment)."""
    def routes(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from routes(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern)

    every = list(routes(get_resolver().url_patterns))
    with_token = [route for route in every if re.search(r"<(\w+:)?token>", route)]

    assert sorted(with_token) == ["accounts/reset/<uidb64>/<token>/", "approve/<str:token>/"]
    assert mask("/approve/anything-at-all/") == "/approve/<token>/"
    assert mask("/accounts/reset/MQ/cz4ri5-0123456789abcdef/") == "/accounts/reset/MQ/<token>/"
    assert {"push/decide", "push/reject/", "push/extend"} <= set(every)


def test_a_malformed_log_call_is_no_error_of_the_filter():
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "%s %s", ("one",), None)

    assert MaskTokens().filter(record) is True and record.args == ("one",)
