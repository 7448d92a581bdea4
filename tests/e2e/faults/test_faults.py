"""The fault matrix (issue 36): each of Redis, PostgreSQL, the workers, beat and daphne is killed
(-9; PostgreSQL by an immediate stop, its own -9) while four conversations each stand in one phase:
the model answering, a call waiting for a human, a decision being made, an approved tool running.
Then the process is started again, and per cell: nothing lost, nothing run twice, nothing run
unapproved; and after every fault each worker consumes a task of **its own queue** within 15 s of
the process being back, so that a dead worker is never hidden by another one's sweep.

One row per fault, its four cells in one conversation each, at once: five outages, not twenty. The
stack is the row's own (redis-server, two workers, beat, daphne, as test_crashes.py has one); the
database is the session's, so PostgreSQL's row runs on the PostgreSQL run only (SQLite has no
server to kill). The decision of the "deciding" cell is sent while the process is down: stored at
once (a worker, beat or Redis down: the sweeper enqueues it later), held until PostgreSQL is back
(its connection pool waits for it; past the pool's timeout a 503 says to retry), or never received
(daphne down), and then sent again."""
import os
import subprocess
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.db import connections

from approvals.models import Approval
from chat.models import Agent, Conversation, ToolCall
from tests.conftest import wait_until
from tests.e2e.conftest import Api, replies, status_of
from tests.e2e.faults.stack import CONSUMES_AGAIN_SECONDS, OUTAGE_SECONDS, WORKERS, fault_stack  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e

RECOVERY_SECONDS = 60  # every conversation done: lease 3 s, sweeps every second, a worker's start
ON_POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith("postgres")
FAULTS = ["redis", *(["postgresql"] if ON_POSTGRESQL else []), "workers", "beat", "daphne"]


class CountingSite:
    """A web page that counts every fetch of each path: /now/... answers at once, /hold/... when released."""

    def __init__(self):
        self.hits, self.release = Counter(), threading.Event()
        site = self

        class Page(BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits[self.path] += 1
                if self.path.startswith("/hold/"):
                    site.release.wait(30)
                try:
                    self.send_response(200)
                    self.end_headers()
                    self.wfile.write(b"the page")
                except OSError:
                    pass  # the worker that fetched it was killed

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site():
    counting = CountingSite()
    yield counting
    counting.close()


def pending(conversation_id: str) -> Approval:
    approval = wait_until(lambda: Approval.objects.filter(conversation_id=conversation_id, status="pending").first(), message="the approval")
    wait_until(lambda: status_of(conversation_id) == "waiting_for_approval", message="the conversation waiting")
    return approval


def describe(cells: dict) -> str:
    """Where each cell's conversation stands: for a failure to say what happened."""
    lines = []
    for name, conversation_id in cells.items():
        conversation = Conversation.objects.get(pk=conversation_id)
        calls = [(c.name, c.status) for c in ToolCall.objects.filter(message__conversation_id=conversation_id)]
        approvals = list(Approval.objects.filter(conversation_id=conversation_id).values_list("status", flat=True))
        lines.append(f"{name}: {conversation.status}, advancing {conversation.advancing_token!r}, "
                     f"updated {conversation.updated_at:%H:%M:%S.%f}, calls {calls}, approvals {approvals}, replies {replies(conversation_id)}")
    return "\n".join(lines)


def decide(api: Api, approval: Approval) -> int | None:
    """Approve `approval` as shown; the status, or None when daphne did not answer."""
    try:
        return api.post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash}).status_code
    except httpx.TransportError:
        return None


def stop_postgresql() -> None:
    """An immediate stop: PostgreSQL's own -9. First a checkpoint: the throwaway server runs with
    synchronous_commit=off (bin/with-postgres, for speed), so a commit it acknowledged a moment ago
    may still be in its WAL buffers, which an immediate stop loses; a production server (on) never
    loses one. The fault is PostgreSQL dying, not PostgreSQL forgetting what it acknowledged."""
    with connections["default"].cursor() as cursor:
        cursor.execute("CHECKPOINT")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    subprocess.run([*as_postgres, os.environ["HITL_TEST_PG_CTL"], "-D", os.environ["HITL_TEST_PG_DATA"], "-m", "immediate", "stop"],
                   check=True, capture_output=True)


def start_postgresql() -> None:
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    subprocess.run([*as_postgres, os.environ["HITL_TEST_PG_CTL"], "-D", os.environ["HITL_TEST_PG_DATA"], "-l", os.environ["HITL_TEST_PG_LOG"],
                    "-w", "-o", os.environ["HITL_TEST_PG_OPTIONS"], "start"], check=True, capture_output=True)
    connections.close_all()  # this process's connection died with the server


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_in_each_phase_loses_nothing_runs_nothing_twice_or_unapproved_and_every_worker_consumes_again(
    fault_stack, transactional_db, alice, agent, site, fake_model, fault
):
    faults, api = fault_stack, Api(fault_stack.base_url, alice)
    agent.fetch_allowlist, agent.allow_private_fetch = [], True  # fetch is gated, and may reach loopback
    agent.save()
    Agent.objects.create(open_to_everyone=True, slug="remote", name="Remote", model="openai/gpt-4o-mini", api_base=fake_model.base_url)

    def start_conversation(text: str, slug: str = "demo") -> str:
        response = api.post("conversations", {"agent": slug, "message": text})
        assert response.status_code == 201, response.text
        return response.json()["id"]

    # The four cells, each brought to its phase.
    waiting = start_conversation(f"fetch {site.url}/now/waiting")
    deciding = start_conversation(f"fetch {site.url}/now/deciding")
    running = start_conversation(f"fetch {site.url}/hold/running")
    waiting_approval, deciding_approval, running_approval = pending(waiting), pending(deciding), pending(running)
    assert decide(api, running_approval) == 200
    wait_until(lambda: site.hits["/hold/running"] == 1, timeout=20, message="the approved fetch running")
    fake_model.respond_with_hang(4)  # the model answers after the fault began...
    fake_model.respond_with_text("Sorry, I was slow.")  # ...or, if its worker died, when asked again
    model = start_conversation("hello", slug="remote")
    wait_until(lambda: len(fake_model.requests) == 1, timeout=20, message="the model call in flight")

    # The fault: the process dies; the decision is sent and the running tool ends while it is down.
    if fault == "postgresql":
        stop_postgresql()
    else:
        for name in faults.names(fault):
            faults.kill(name)
    decided = {}  # sent from a thread: over PostgreSQL's outage, the request waits for the pool
    sender = threading.Thread(target=lambda: decided.update(status=decide(api, deciding_approval)))
    sender.start()
    site.release.set()
    time.sleep(OUTAGE_SECONDS)
    if fault == "postgresql":
        start_postgresql()
    else:
        for name in faults.names(fault):
            faults.start(name)
    back = time.monotonic()
    sender.join(timeout=40)
    decided_while_down = decided.get("status")

    try:
        for worker in WORKERS:
            faults.probe(worker, deadline=back + CONSUMES_AGAIN_SECONDS)
        # Stored at once; or held until PostgreSQL is back (its pool waits), else a 503 to retry; or, daphne down, never received.
        expected_while_down = {"postgresql": {200, 503}, "daphne": {None}}.get(fault, {200})
        assert decided_while_down in expected_while_down, f"the decision sent while {fault} was down: {decided_while_down}"
        if decided_while_down != 200:
            assert decide(api, deciding_approval) == 200  # sent again once it is back
        assert decide(api, waiting_approval) == 200
        for conversation_id in (waiting, deciding, running, model):
            wait_until(lambda: status_of(conversation_id) == "idle", timeout=RECOVERY_SECONDS, message=f"{conversation_id} done")
    except AssertionError as exc:
        cells = {"waiting": waiting, "deciding": deciding, "running": running, "model": model}
        raise AssertionError(f"{exc}\n{describe(cells)}\n{faults.tails()}") from None

    # Nothing lost, nothing twice: every fetch ran once; the model's answer is there once.
    assert site.hits == Counter({"/now/waiting": 1, "/now/deciding": 1, "/hold/running": 1})
    calls = {cell: ToolCall.objects.get(message__conversation_id=cell) for cell in (waiting, deciding, running)}
    assert (calls[waiting].status, calls[deciding].status) == ("succeeded", "succeeded")
    # A tool whose worker died (or whose result could not be stored) may have run: interrupted, never run again.
    ran = calls[running].status
    assert ran == "succeeded" or (fault in ("workers", "postgresql") and ran == "interrupted"), ran
    assert replies(model) == ["Sorry, I was slow."]
    assert len(fake_model.requests) <= 2
    # Nothing unapproved: each call that ran was approved, once, by alice.
    for call in calls.values():
        approval = Approval.objects.get(tool_call=call)
        assert (approval.status, approval.decided_by) == ("approved", alice)
    for process in faults.processes.values():
        assert process.alive(), f"{process.name} died:\n{process.tail()}"
