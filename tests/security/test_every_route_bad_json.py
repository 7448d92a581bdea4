"""Bad JSON is a 4xx on every route (issue 36 item 5): each URL pattern of hitl/urls.py, its path
parameters filled in, gets a body nested 1,000 and 4,000 levels deep, a lone UTF-16 surrogate, a
NUL and NaN, as nobody and as a signed-in user, by POST; no answer is a 500."""
import uuid

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)

BODIES = {
    "nested 1,000 deep": "[" * 1000 + "]" * 1000,
    "nested 4,000 deep": '{"a":' * 4000 + "1" + "}" * 4000,
    "a lone surrogate": '{"agent": "demo", "message": "\\ud800", "token": "\\udfff", "endpoint": "https://x/\\ud800"}',
    "a NUL": '{"agent": "demo", "message": "a\\u0000b", "name": "\\u0000"}',
    "NaN": '{"seconds": NaN, "ids": [Infinity]}',
}
SAMPLES = {"int": "1", "uuid": str(uuid.UUID(int=1)), "str": "x", "slug": "demo", "path": "x"}


def routes(resolver=None, prefix="") -> list[str]:
    """Every URL pattern as a path, its converters filled with a sample value."""
    found = []
    for entry in (resolver or get_resolver()).url_patterns:
        pattern = str(entry.pattern)
        if pattern.startswith("^") or "(?P" in pattern:  # a regex route (the admin's, static files): skipped
            continue
        for name, sample in SAMPLES.items():
            while f"<{name}:" in pattern:
                start = pattern.index(f"<{name}:")
                pattern = pattern[:start] + sample + pattern[pattern.index(">", start) + 1:]
        pattern = "".join(SAMPLES["str"] if part.startswith("<") else part for part in _split(pattern))
        if isinstance(entry, URLResolver):
            found += routes(entry, prefix + pattern)
        elif isinstance(entry, URLPattern):
            found.append("/" + prefix + pattern)
    return sorted(set(found))


def _split(pattern: str) -> list[str]:
    parts, rest = [], pattern
    while "<" in rest:
        before, _, after = rest.partition("<")
        name, _, rest = after.partition(">")
        parts += [before, f"<{name}>"]
    return parts + [rest]


def test_there_are_routes_to_attack():
    found = routes()
    assert len(found) > 60 and "/push/decide" in found and "/stepup/passkeys/" in found and "/api/conversations" in found


@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "signed in"])
def test_no_route_answers_bad_json_with_a_500(signed_in, alice, agent):
    client = client_for(alice) if signed_in else Client()
    client.raise_request_exception = False
    failures, reached = [], 0
    for path in routes():
        if path.startswith(("/admin/", "/static/", "/mcp")) or "logout" in path:
            continue  # Django's own admin; the gateway's ASGI app (its own suite); a logout would end the signed-in run
        for name, body in BODIES.items():
            answer = client.post(path, body, content_type="application/json")
            if answer.status_code >= 500:
                failures.append(f"POST {path} with {name}: {answer.status_code}")
            reached += answer.status_code not in (301, 302, 403, 404, 405)
    assert not failures, "\n".join(failures)
    assert reached > (100 if signed_in else 20)  # the bodies reached views, not only redirects to the login page


def test_the_a2a_limits_peek_at_any_body_without_crashing():
    """The A2A middleware reads a request's method to count streams; the A2A handler answers what is not JSON-RPC."""
    from agentlink.limits import _method

    for body in BODIES.values():
        assert _method(body.encode()) == ("", None)
    assert _method(b'{"jsonrpc": "2.0", "id": 3, "method": "SendMessage"}') == ("SendMessage", 3)
