"""The Python client (clients/python) against the real stack: daphne serving the approval-requests
API, a person deciding through the JSON API, the outcome stored. A gated function waits in a thread
of this process, as an outside agent's would, while the test decides."""
import asyncio
import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from approvals.models import Approval, Outcome
from chat.models import Agent, ApiToken, Conversation, ToolCall
from hitl_client import AsyncClient, Client, HitlError, Rejected, StillPending, gate
from tests.conftest import wait_until
from tests.e2e.conftest import BIN, free_port, port_open, start

pytestmark = pytest.mark.e2e
DECIDED_WITHIN = 30  # seconds for a gated call to return once decided (a loaded 2-core machine)


@pytest.fixture
def releases(e2e):
    """An agent record that is only a policy for outside calls: `deploy` needs a human, `status` does not."""
    return Agent.objects.create(slug="releases", name="Releases", require_approval=["deploy"], open_to_everyone=True)


@pytest.fixture
def client_for(e2e):
    clients = []

    def make(user, base_url: str = "", **options) -> Client:
        clients.append(Client(base_url or e2e.base_url, ApiToken.issue(user), **options))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def in_background():
    """Run a blocking call (a gated function waiting for its decision) beside the test."""
    with ThreadPoolExecutor(2) as pool:
        yield pool.submit


def counting_requests(client: Client) -> list[str]:
    """The requests the client makes from now on, as 'GET /api/approvals/7'."""
    seen = []
    client.http.event_hooks["request"].append(lambda request: seen.append(f"{request.method} {request.url.path}"))
    return seen


def pending_for(api, tool: str) -> dict:
    def pending():
        items = api.get("approvals", status="pending", tool=tool).json()["items"]
        return items[0] if len(items) == 1 else None

    return wait_until(pending, timeout=15, message=f"one pending approval of {tool}")


def approve(api, approval: dict, **fields) -> dict:
    response = api.post(f"approvals/{approval['id']}/decision", {"decision": "approve", "shown_hash": approval["shown_hash"]} | fields)
    assert response.status_code == 200, response.text
    return response.json()


def result_of(future: Future, timeout: float = DECIDED_WITHIN):
    return future.result(timeout=timeout)


def test_a_gated_function_runs_once_with_the_arguments_an_approver_edited(e2e, api_for, client_for, in_background, alice, bob, releases):
    runs = []

    @gate(client_for(alice), agent="releases", reason="Release 1.4", thread="release-1.4")
    def deploy(service: str, version: str) -> str:
        runs.append((service, version))
        return f"Deployed {service} {version}"

    returned = in_background(deploy, "api", "1.4")
    bob_api = api_for(bob)
    pending = pending_for(bob_api, "deploy")
    assert pending["arguments"] == {"service": "api", "version": "1.4"} and pending["reason"] == "Release 1.4"
    assert not runs

    approve(bob_api, pending, arguments={"service": "api", "version": "1.4.1"})

    assert result_of(returned) == "Deployed api 1.4.1"
    assert runs == [("api", "1.4.1")]
    stored = api_for(alice).get(f"approvals/{pending['id']}").json()
    assert (stored["status"], stored["decided_by"], stored["approved_arguments"]) == ("approved", "bob", {"service": "api", "version": "1.4.1"})
    assert stored["outcome"] == {"status": "succeeded", "result": "Deployed api 1.4.1"}
    outcome = Outcome.objects.get(approval_id=pending["id"])
    assert (outcome.status, outcome.result, outcome.reported_by) == ("succeeded", "Deployed api 1.4.1", alice)
    assert outcome.shown_hash == Approval.objects.get(pk=pending["id"]).shown_hash
    call = ToolCall.objects.get(pk=pending["tool_call"]["id"])
    assert (call.name, call.arguments) == ("deploy", {"service": "api", "version": "1.4"})
    assert (call.status, call.result) == ("succeeded", "Deployed api 1.4.1")
    conversation = Conversation.objects.get(pk=pending["conversation_id"])
    assert (conversation.owner, conversation.source, conversation.external_thread) == (alice, "api", "release-1.4")


def test_a_rejection_raises_rejected_with_the_reason_and_the_function_never_runs(e2e, api_for, client_for, in_background, alice, bob, releases):
    runs = []

    @gate(client_for(alice), agent="releases")
    def deploy(service: str) -> None:
        runs.append(service)

    returned = in_background(deploy, "api")
    pending = pending_for(api_for(bob), "deploy")
    response = api_for(bob).post(f"approvals/{pending['id']}/decision", {"decision": "reject", "reason": "Not on a Friday"})
    assert response.status_code == 200

    with pytest.raises(Rejected) as raised:
        result_of(returned)
    assert (raised.value.reason, raised.value.decided_by) == ("Not on a Friday", "bob")
    assert runs == [] and not Outcome.objects.exists()
    assert Approval.objects.get(pk=pending["id"]).status == "rejected"


def test_the_async_client_gates_an_async_function(e2e, api_for, in_background, alice, bob, releases):
    runs = []
    token = ApiToken.issue(alice)

    async def deploy_once() -> str:
        async with AsyncClient(e2e.base_url, token) as client:

            @gate(client, agent="releases", thread="async")
            async def deploy(service: str) -> str:
                runs.append(service)
                return f"Deployed {service}"

            return await deploy("api")

    returned = in_background(asyncio.run, deploy_once())
    approve(api_for(bob), pending_for(api_for(bob), "deploy"))

    assert result_of(returned) == "Deployed api"
    assert runs == ["api"]
    assert Outcome.objects.get().result == "Deployed api"


def test_a_wait_longer_than_one_long_poll_still_gets_the_decision(e2e, api_for, client_for, in_background, alice, bob, releases):
    client = client_for(alice, poll=1)
    requests = counting_requests(client)
    returned = in_background(client.request_approval, "releases", "deploy", {"service": "api"})
    pending = pending_for(api_for(bob), "deploy")
    wait_until(lambda: requests.count(f"GET /api/approvals/{pending['id']}") >= 3, timeout=15, message="three long polls")

    approve(api_for(bob), pending)

    decision = result_of(returned)
    assert decision.approved and decision.id == pending["id"] and decision.decided_via == "api"


def test_a_wait_that_ends_first_leaves_the_approval_pending_and_can_be_resumed(e2e, api_for, client_for, in_background, alice, bob, releases):
    client = client_for(alice)
    runs = []

    @gate(client, agent="releases", timeout=1)
    def deploy(service: str) -> None:
        runs.append(service)

    with pytest.raises(StillPending) as raised:
        deploy("api")
    pending = raised.value.decision
    assert runs == [] and Approval.objects.get(pk=pending.id).status == "pending"

    returned = in_background(client.wait, pending)
    approve(api_for(bob), pending.raw)
    assert result_of(returned).approved


def test_an_ungated_tool_is_approved_at_once_and_runs_without_waiting(e2e, client_for, alice, releases):
    client = client_for(alice)
    requests = counting_requests(client)

    @gate(client, agent="releases", thread="checks")
    def status(service: str) -> dict:
        return {"service": service, "healthy": True}

    assert status("api") == {"service": "api", "healthy": True}
    assert requests[0] == "POST /api/approval-requests" and not any(r.startswith("GET") for r in requests)
    approval = Approval.objects.get()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "policy", None)
    assert approval.outcome.result == '{"service": "api", "healthy": true}'


def test_a_gated_function_that_fails_reports_it_and_raises(e2e, client_for, alice, releases):
    @gate(client_for(alice), agent="releases", tool="status")
    def check(service: str) -> None:
        raise ConnectionError(f"{service} did not answer")

    with pytest.raises(ConnectionError):
        check("api")
    approval = Approval.objects.select_related("tool_call").get()
    assert (approval.outcome.status, approval.outcome.result) == ("failed", "ConnectionError: api did not answer")
    assert (approval.tool_call.status, approval.tool_call.error) == ("failed", "ConnectionError: api did not answer")


def test_the_client_says_what_the_server_refused(e2e, api_for, client_for, alice, bob, releases):
    client = client_for(alice)
    with pytest.raises(HitlError) as unknown:
        client.request_approval("no-such-agent", "deploy", {})
    assert (unknown.value.status_code, unknown.value.field) == (400, "agent")

    pending = client.request_approval("releases", "deploy", {"service": "api"}, wait=False)
    with pytest.raises(HitlError) as on_pending:
        client.report_outcome(pending, "succeeded")
    api_for(bob).post(f"approvals/{pending.id}/decision", {"decision": "reject", "reason": "no"})
    with pytest.raises(HitlError) as on_rejected:
        client.report_outcome(client.get_approval(pending.id), "succeeded")
    assert on_pending.value.status_code == on_rejected.value.status_code == 409

    approved = client.request_approval("releases", "status", {"service": "api"})
    with pytest.raises(HitlError) as other_version:
        client.report_outcome(dataclasses.replace(approved, shown_hash="0" * 64), "succeeded")
    assert other_version.value.status_code == 409 and not Outcome.objects.exists()
    client.report_outcome(approved, "succeeded", "fine")
    with pytest.raises(HitlError) as replayed:
        client.report_outcome(approved, "failed", "changed my mind")
    assert replayed.value.status_code == 409
    assert Outcome.objects.get().result == "fine"


def test_nobody_but_the_requester_reads_or_reports_its_approval(e2e, client_for, alice, bob, mallory, releases):
    approved = client_for(alice).request_approval("releases", "status", {"service": "api"})
    refusals = {}
    with Client(e2e.base_url, "not-a-token") as tokenless:
        for name, outsider in (("mallory", client_for(mallory)), ("bob", client_for(bob)), ("no token", tokenless)):
            for attempt, call in (("read", lambda: outsider.get_approval(approved.id)), ("report", lambda: outsider.report_outcome(approved, "succeeded", "forged"))):
                try:
                    call()
                except HitlError as error:
                    refusals[name, attempt] = error.status_code

    # bob, an approver, sees it but did not ask for it. A bad token is a 401, a POST too (never the
    # session's CSRF 403: a request that sends a bearer token is a program's).
    assert refusals == {
        ("mallory", "read"): 404, ("mallory", "report"): 404, ("bob", "report"): 403,
        ("no token", "read"): 401, ("no token", "report"): 401,
    }
    assert not Outcome.objects.exists()


@pytest.fixture
def own_daphne(e2e):
    """A daphne of this test's own, beside the stack's (same database and channel layer), to restart."""
    port = free_port()
    args = [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"]
    processes = [start("client-web", args, e2e.env, e2e.work)]
    wait_until(lambda: port_open(port), timeout=30, message="the test's daphne")

    def restart(between=lambda: None):
        processes[-1].stop()
        between()
        processes.append(start("client-web-again", args, e2e.env, e2e.work))

    yield f"http://127.0.0.1:{port}", restart
    for process in processes:
        process.stop()


def test_a_daphne_restart_during_the_wait_loses_nothing(e2e, api_for, client_for, in_background, own_daphne, alice, bob, releases):
    base_url, restart = own_daphne
    client = client_for(alice, base_url)
    requests = counting_requests(client)
    runs = []

    @gate(client, agent="releases")
    def deploy(service: str) -> str:
        runs.append(service)
        return "ok"

    returned = in_background(deploy, "api")
    pending = pending_for(api_for(bob), "deploy")
    wait_until(lambda: f"GET /api/approvals/{pending['id']}" in requests, timeout=15, message="the long poll")

    restart(between=lambda: approve(api_for(bob), pending))  # decided on the stack's daphne while the client's is down

    assert result_of(returned, timeout=60) == "ok"  # daphne's start, and the client's backoff
    assert runs == ["api"] and Outcome.objects.get(approval_id=pending["id"]).status == "succeeded"
    assert requests.count(f"GET /api/approvals/{pending['id']}") >= 2


def test_the_caller_says_how_long_its_request_waits_and_it_expires_then(e2e, client_for, alice, releases):
    """AgentKit's expiresAt, Swift's timeout: `expires_in` on the request (issue 39, item 8)."""
    client = client_for(alice)

    decision = client.request_approval("releases", "deploy", {"service": "web"}, thread="release-8", expires_in=2, wait=True, timeout=20)

    assert decision.status == "expired"
    approval = Approval.objects.get(pk=decision.id)
    assert (approval.expires_at - approval.requested_at).total_seconds() <= 2.5
    listed = client.http.get("approvals", params={"thread": "release-8"}).json()["items"]
    assert [item["id"] for item in listed] == [decision.id]


def test_list_pending_by_thread_and_by_requester_through_the_client(e2e, client_for, alice, bob, releases):
    """AgentKit's listPendingApprovals({threadId, userId}) as the Python client says it (issue 39, item 9)."""
    alices = client_for(alice)
    first = alices.request_approval("releases", "deploy", {"service": "web"}, thread="release-9", wait=False)
    alices.request_approval("releases", "deploy", {"service": "api"}, thread="release-10", wait=False)
    bobs = client_for(bob).request_approval("releases", "deploy", {"service": "db"}, thread="release-9", wait=False)

    assert [d.id for d in alices.list_pending(thread="release-9")] == [first.id]  # bob's is not hers to see
    assert {d.id for d in client_for(bob).list_pending(thread="release-9", requester="bob")} == {bobs.id}
    assert all(d.pending and d.tool == "deploy" for d in alices.list_pending(requester="alice"))
    assert len(alices.list_pending(requester="alice")) == 2
