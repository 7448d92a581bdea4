"""The Python client (clients/python) against a stand-in for the API (httpx.MockTransport): what it
sends, how it reads answers and errors, how it waits and retries, and the `gate` decorator. The
real server: tests/e2e/outside/test_python_client_e2e.py."""
import asyncio
import inspect
import json
import time

import httpx
import pytest

from hitl_client import (
    AsyncClient, Cancelled, Client, Decision, Expired, HitlError, Rejected, Retry, StillPending, Unreachable, gate,
)
from hitl_client import flows
from hitl_client.gate import arguments_of, call_of

NO_PAUSE = Retry(attempts=3, backoff=0)


def approval(**fields) -> dict:
    """An approval object as the API shows it: pending, for `deploy` with {"service": "api"}."""
    return {
        "id": 7, "kind": "action", "status": "pending", "reason": "", "risk": "medium", "decided_by": None,
        "decided_via": "", "rejection_reason": "", "comment": "", "arguments": {"service": "api"},
        "approved_arguments": None, "shown_hash": "h1", "conversation": "c0ffee",
        "tool_call": {"id": 3, "name": "deploy", "arguments": {"service": "api"}, "status": "pending_approval"},
    } | fields


APPROVED = approval(status="approved", decided_by="bob", decided_via="api", approved_arguments={"service": "api"})
EDITED = approval(status="approved", decided_by="bob", decided_via="api", approved_arguments={"service": "web"}, shown_hash="h2")
REJECTED = approval(status="rejected", decided_by="bob", decided_via="api", rejection_reason="Not on a Friday")


class FakeApi:
    """Answers requests in turn from `answers`: a (status, body) pair, or an exception to raise."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body) if not isinstance(body, str) else httpx.Response(status, text=body)

    def bodies(self) -> list:
        return [json.loads(r.content) if r.content else None for r in self.requests]

    def lines(self) -> list[str]:
        return [f"{r.method} {r.url.path}" + (f"?{r.url.query.decode()}" if r.url.query else "") for r in self.requests]


def client_for(api: FakeApi, retry: Retry = NO_PAUSE) -> Client:
    return Client("http://hitl.test", "secret", retry=retry, transport=httpx.MockTransport(api))


def async_client_for(api: FakeApi, retry: Retry = NO_PAUSE) -> AsyncClient:
    return AsyncClient("http://hitl.test/api/", "secret", retry=retry, transport=httpx.MockTransport(api))


def test_a_request_sends_only_the_fields_given_with_the_token_and_reads_a_typed_decision():
    api = FakeApi((201, approval(status="approved", decided_via="policy", approved_arguments={"service": "api"})))

    decision = client_for(api).request_approval("ops", "deploy", {"service": "api"}, reason="Release", thread="t-1")

    assert api.lines() == ["POST /api/approval-requests"]
    assert api.requests[0].headers["authorization"] == "Bearer secret"
    assert api.bodies() == [{"agent": "ops", "tool": "deploy", "arguments": {"service": "api"}, "reason": "Release", "thread": "t-1"}]
    assert decision == Decision(
        id=7, status="approved", approved=True, tool="deploy", arguments={"service": "api"},
        requested_arguments={"service": "api"}, decided_by=None, decided_via="policy", rejection_reason="", comment="",
        shown_hash="h1", conversation="c0ffee", raw={},
    )
    assert decision.raw["risk"] == "medium" and not decision.edited


def test_a_pending_request_long_polls_until_decided_and_returns_the_edited_arguments():
    api = FakeApi((201, approval()), (200, approval()), (200, EDITED))

    decision = client_for(api).request_approval("ops", "deploy", {"service": "api"})

    assert api.lines() == ["POST /api/approval-requests", "GET /api/approvals/7?wait=60", "GET /api/approvals/7?wait=60"]
    assert (decision.approved, decision.arguments, decision.requested_arguments) == (True, {"service": "web"}, {"service": "api"})
    assert decision.edited and decision.shown_hash == "h2" and decision.decided_by == "bob"


def test_without_wait_the_request_returns_pending_and_wait_picks_it_up_later():
    api = FakeApi((201, approval()), (200, APPROVED))
    client = client_for(api)

    pending = client.request_approval("ops", "deploy", {"service": "api"}, wait=False)
    assert pending.pending and api.lines() == ["POST /api/approval-requests"]
    assert client.wait(pending).approved


def test_a_timeout_shortens_the_long_poll_and_returns_the_approval_still_pending():
    polls = []

    def still_pending(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            polls.append(request.url.params["wait"])
            time.sleep(0.05)  # the server holds the answer (for less than `wait`: nobody decides here)
        return httpx.Response(201 if request.method == "POST" else 200, json=approval())

    client = Client("http://hitl.test", "secret", retry=NO_PAUSE, transport=httpx.MockTransport(still_pending))
    decision = client.request_approval("ops", "deploy", {"service": "api"}, timeout=0.2)

    assert decision.pending
    assert polls and set(polls) == {"1"}
    with pytest.raises(StillPending):
        decision.raise_for_status()


def test_a_shorter_poll_waits_in_shorter_requests():
    api = FakeApi((201, approval()), (200, approval()), (200, APPROVED))
    client = Client("http://hitl.test", "secret", poll=5, retry=NO_PAUSE, transport=httpx.MockTransport(api))
    assert client.request_approval("ops", "deploy", {"service": "api"}).approved
    assert api.lines()[1:] == ["GET /api/approvals/7?wait=5"] * 2


def test_get_approval_never_asks_the_server_to_hold_longer_than_60_seconds():
    api = FakeApi((200, approval()), (200, approval()))
    client = client_for(api)
    client.get_approval(7, wait=600)
    client.get_approval(7)
    assert api.lines() == ["GET /api/approvals/7?wait=60", "GET /api/approvals/7"]


def test_a_dropped_long_poll_and_a_restarting_server_are_retried_until_the_decision_arrives():
    api = FakeApi(
        (201, approval()),
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ConnectError("Connection refused"),
        (502, "Bad gateway"),
        (200, APPROVED),
    )

    decision = client_for(api).request_approval("ops", "deploy", {"service": "api"})

    assert decision.approved and len(api.requests) == 5


def test_retries_back_off_and_are_bounded():
    flow = flows.get_approval(7, wait=0, retry=Retry(attempts=3, backoff=0.5, max_backoff=1.0))
    refused = httpx.ConnectError("Connection refused")

    assert isinstance(next(flow), flows.Call)
    pauses = []
    for _ in range(3):
        pauses.append(flow.throw(refused))
        assert isinstance(flow.send(None), flows.Call)
    with pytest.raises(Unreachable) as raised:
        flow.throw(refused)

    assert pauses == [flows.Pause(0.5), flows.Pause(1.0), flows.Pause(1.0)]
    assert raised.value.status_code is None and "Connection refused" in str(raised.value)


def test_a_server_down_for_good_is_reported_after_the_retries():
    api = FakeApi(*[httpx.ConnectError("Connection refused")] * 4)
    with pytest.raises(Unreachable):
        client_for(api).get_approval(7, wait=30)
    assert len(api.requests) == 4


def test_a_request_that_may_have_reached_the_server_is_not_sent_twice():
    api = FakeApi(httpx.ReadError("connection reset"))

    with pytest.raises(Unreachable, match="may have reached the server"):
        client_for(api).request_approval("ops", "deploy", {"service": "api"})

    assert len(api.requests) == 1


def test_a_request_that_cannot_be_sent_at_all_says_so_once():
    api = FakeApi(httpx.UnsupportedProtocol("Request URL is missing an 'http://' or 'https://' protocol."))
    with pytest.raises(Unreachable) as raised:
        client_for(api).request_approval("ops", "deploy", {"service": "api"})
    assert "protocol" in str(raised.value) and "may have reached" not in str(raised.value)
    assert len(api.requests) == 1


def test_a_request_refused_before_it_was_sent_is_sent_again():
    api = FakeApi(httpx.ConnectError("Connection refused"), (201, APPROVED))
    assert client_for(api).request_approval("ops", "deploy", {"service": "api"}).approved
    assert api.lines() == ["POST /api/approval-requests"] * 2


@pytest.mark.parametrize(
    "status, body, detail",
    [
        (400, {"detail": "`agent`: no agent 'nope' you may use."}, "`agent`: no agent 'nope' you may use."),
        (404, {"detail": "No such approval."}, "No such approval."),
        (409, {"detail": "Already reported."}, "Already reported."),
        (422, {"detail": [{"loc": ["body", "arguments"], "msg": "not a dict"}]}, [{"loc": ["body", "arguments"], "msg": "not a dict"}]),
        (500, "<h1>Server Error</h1>", "<h1>Server Error</h1>"),
    ],
)
def test_an_error_answer_raises_hitl_error_with_its_status_and_detail(status, body, detail):
    api = FakeApi((status, body))
    with pytest.raises(HitlError) as raised:
        client_for(api).request_approval("nope", "deploy", {})
    assert (raised.value.status_code, raised.value.detail) == (status, detail)
    assert len(api.requests) == 1


def test_a_400_names_the_field_to_fix():
    api = FakeApi((400, {"detail": "`preview.text` is over the limit.", "field": "preview.text"}))
    with pytest.raises(HitlError) as raised:
        client_for(api).request_approval("ops", "deploy", {}, preview={"kind": "text", "text": "x" * 30_000})
    assert raised.value.field == "preview.text" and raised.value.detail == "`preview.text` is over the limit."


@pytest.mark.parametrize(
    "body",
    ["not json", [], {"id": 7}, approval(arguments=["a"]), approval(approved_arguments="x"), approval(id="seven"), approval(status=3)],
)
def test_an_answer_that_is_not_an_approval_object_raises_hitl_error_not_a_key_error(body):
    with pytest.raises(HitlError) as raised:
        client_for(FakeApi((200, body))).get_approval(7)
    assert raised.value.status_code == 200


def test_arguments_must_be_a_mapping_and_an_outcome_succeeded_or_failed():
    client = client_for(FakeApi())
    with pytest.raises(TypeError):
        client.request_approval("ops", "deploy", [("service", "api")])
    with pytest.raises(ValueError):
        client.report_outcome(Decision.from_json(APPROVED), "done")


def test_report_outcome_sends_the_approved_versions_hash():
    api = FakeApi((200, EDITED | {"outcome": {"status": "succeeded"}}))
    client_for(api).report_outcome(Decision.from_json(EDITED), "succeeded", "Deployed web")
    assert api.lines() == ["POST /api/approvals/7/outcome"]
    assert api.bodies() == [{"status": "succeeded", "shown_hash": "h2", "result": "Deployed web"}]


def test_an_outcome_is_shortened_and_cleaned_to_what_the_server_keeps():
    api = FakeApi((200, APPROVED))
    client_for(api).report_outcome(Decision.from_json(APPROVED), "succeeded", "a\x00b\ud800" + "x" * 30_000)
    result = api.bodies()[0]["result"]
    assert len(result) == 20_000 and result.startswith("ab?x") and result.endswith("x…")


def test_not_approved_decisions_raise_their_own_errors_with_the_reason_and_who():
    with pytest.raises(Rejected) as raised:
        Decision.from_json(REJECTED).raise_for_status()
    assert (raised.value.reason, raised.value.decided_by) == ("Not on a Friday", "bob")
    assert str(raised.value) == "Rejected by bob: Not on a Friday"
    with pytest.raises(Expired):
        Decision.from_json(approval(status="expired", decided_via="timeout")).raise_for_status()
    with pytest.raises(Cancelled):
        Decision.from_json(approval(status="cancelled")).raise_for_status()
    assert Decision.from_json(APPROVED).raise_for_status().approved


def test_the_async_client_follows_the_same_flow():
    api = FakeApi((201, approval()), httpx.ReadTimeout("timed out"), (200, EDITED), (200, EDITED))

    async def ask():
        async with async_client_for(api) as client:
            decision = await client.request_approval("ops", "deploy", {"service": "api"})
            return decision, await client.report_outcome(decision, "failed", "boom")

    decision, reported = asyncio.run(ask())
    assert decision.arguments == {"service": "web"} and reported.id == 7
    assert api.lines() == ["POST /api/approval-requests", "GET /api/approvals/7?wait=60", "GET /api/approvals/7?wait=60", "POST /api/approvals/7/outcome"]


def test_gate_runs_the_function_once_with_the_approved_arguments_and_reports_its_result():
    api = FakeApi((201, approval()), (200, EDITED), (200, EDITED))
    runs = []

    @gate(client_for(api), agent="ops", reason="Release", thread="t-1")
    def deploy(service: str, version: str = "1.0") -> dict:
        runs.append((service, version))
        return {"deployed": service}

    assert deploy("api") == {"deployed": "web"}
    assert runs == [("web", "1.0")]
    request, _, outcome = api.bodies()
    assert request == {"agent": "ops", "tool": "deploy", "arguments": {"service": "api", "version": "1.0"}, "reason": "Release", "thread": "t-1"}
    assert outcome == {"status": "succeeded", "shown_hash": "h2", "result": '{"deployed": "web"}'}


def test_gate_raises_rejected_and_never_runs_the_function():
    api = FakeApi((201, REJECTED))
    runs = []

    @gate(client_for(api), agent="ops", tool="production_deploy")
    def deploy(service: str) -> None:
        runs.append(service)

    with pytest.raises(Rejected, match="Not on a Friday"):
        deploy("api")
    assert runs == [] and api.lines() == ["POST /api/approval-requests"]
    assert api.bodies()[0]["tool"] == "production_deploy"


def test_gate_reports_a_failure_and_re_raises_it():
    api = FakeApi((201, APPROVED), (200, APPROVED))

    @gate(client_for(api), agent="ops", preview=lambda arguments: {"kind": "text", "text": f"Deploy {arguments['service']}"})
    def deploy(service: str) -> str:
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        deploy(service="api")
    assert api.bodies()[0]["preview"] == {"kind": "text", "text": "Deploy api"}
    assert api.bodies()[1] == {"status": "failed", "shown_hash": "h1", "result": "RuntimeError: disk full"}


def test_gate_returns_the_result_even_when_the_outcome_cannot_be_reported():
    api = FakeApi((201, APPROVED), (409, {"detail": "Already reported."}))

    @gate(client_for(api), agent="ops")
    def deploy(service: str) -> str:
        return f"deployed {service}"

    assert deploy("api") == "deployed api"


def test_gate_gates_async_functions_with_the_async_client():
    api = FakeApi((201, approval()), (200, EDITED), (200, EDITED))

    @gate(async_client_for(api), agent="ops")
    async def deploy(service: str) -> str:
        return f"deployed {service}"

    assert asyncio.run(deploy("api")) == "deployed web"
    assert api.bodies()[2] == {"status": "succeeded", "shown_hash": "h2", "result": "deployed web"}

    rejecting = FakeApi((201, REJECTED))

    @gate(async_client_for(rejecting), agent="ops")
    async def delete(path: str) -> None:
        raise AssertionError("never runs")

    with pytest.raises(Rejected):
        asyncio.run(delete("/"))


def test_gate_refuses_a_client_that_cannot_run_the_function():
    with pytest.raises(TypeError, match="AsyncClient"):
        gate(client_for(FakeApi()), agent="ops")(asyncio.sleep)
    with pytest.raises(TypeError, match="Client"):
        gate(async_client_for(FakeApi()), agent="ops")(print)


def test_approved_arguments_call_every_kind_of_parameter_as_named():
    def tool(a, /, b, *rest, c, d=4, **more):
        return a, b, rest, c, d, more

    signature = inspect.signature(tool)
    arguments = arguments_of(signature, (1, 2, 3), {"c": 5, "e": 6})
    assert arguments == {"a": 1, "b": 2, "rest": [3], "c": 5, "d": 4, "e": 6}

    edited = arguments | {"b": 20, "rest": [30, 31], "e": 60}
    args, kwargs = call_of(signature, edited)
    assert tool(*args, **kwargs) == (1, 20, (30, 31), 5, 4, {"e": 60})

    def plain(path, mode="w"):
        return path, mode

    args, kwargs = call_of(inspect.signature(plain), {"path": "a.txt"})  # an approver removed `mode`: its default
    assert plain(*args, **kwargs) == ("a.txt", "w")


def test_extend_and_ask_again_post_to_their_routes_and_read_the_new_approval():
    extended = approval(expires_at="2026-12-02T10:10:00Z", extended_at="2026-12-02T10:00:00Z")
    again = approval(id=8, asked_again_from=7)
    api = FakeApi((200, extended), (409, {"detail": "It was extended once already."}), (201, again))
    with client_for(api) as client:
        first = client.extend(Decision.from_json(approval()), seconds=300)
        with pytest.raises(HitlError) as refused:
            client.extend(first)
        renewed = client.ask_again(Decision.from_json(approval(status="expired")))

    assert first.raw["expires_at"] == "2026-12-02T10:10:00Z" and refused.value.status_code == 409
    assert renewed.id == 8 and renewed.pending and renewed.raw["asked_again_from"] == 7
    assert api.lines() == ["POST /api/approvals/7/extend", "POST /api/approvals/7/extend", "POST /api/approvals/7/ask-again"]
    assert api.bodies() == [{"seconds": 300}, {}, {}]


def test_list_pending_asks_for_pending_ones_of_a_thread_and_a_requester_and_reads_each():
    api = FakeApi((200, {"items": [approval(id=7), approval(id=8)], "count": 2}))

    listed = client_for(api).list_pending(thread="t-1", requester="alice")

    assert [d.id for d in listed] == [7, 8] and all(d.pending for d in listed)
    assert api.lines() == ["GET /api/approvals?status=pending&thread=t-1&requester=alice&limit=100"]
