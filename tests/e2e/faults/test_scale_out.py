"""Scale-out as deployed: two daphne processes and two Celery workers on one database and one Redis.
A decision posted to daphne A reaches a socket on daphne B; the loop runs on whichever worker is free."""
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from websockets.sync.client import connect

from chat.models import Conversation, ToolCall
from tests.conftest import wait_until
from tests.e2e.conftest import BIN, Api, free_port, port_open, start as start_process
from tests.e2e.chat.test_api_e2e import receive_until, session_headers, wait_for_pending, wait_for_status

pytestmark = pytest.mark.e2e
TASK_DONE = re.compile(r"Task chat\.tasks\.advance_conversation\[[^\]]+\] succeeded")


@pytest.fixture(scope="module")
def second_web_and_worker(stack):
    """daphne B and worker 2 beside the session's daphne A and worker 1."""
    port = free_port()
    worker = start_process(
        "worker2",
        [str(BIN / "celery"), "-A", "hitl", "worker", "--loglevel", "INFO", "--concurrency", "1",
         "--without-mingle", "--without-gossip", "--hostname", "second@%h"],
        stack.env,
        stack.work,
    )
    web = start_process("web2", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"], stack.env, stack.work)
    try:
        wait_until(lambda: port_open(port), timeout=30, message="daphne B")
        wait_until(lambda: "ready." in worker.log.read_text(), timeout=60, message="worker 2")
        yield f"127.0.0.1:{port}", worker
    finally:
        web.stop()
        worker.stop()


def test_a_decision_posted_to_one_daphne_reaches_a_socket_on_the_other(e2e, second_web_and_worker, alice, agent):
    web_b, _ = second_web_and_worker
    api_a = Api(e2e.base_url, alice)
    conversation_id = api_a.post("conversations", {"agent": "demo", "message": "write hi to a.txt"}).json()["id"]
    [approval] = wait_for_pending(api_a, conversation_id, 1)

    with connect(f"ws://{web_b}/ws/conversations/{conversation_id}/", origin=f"http://{web_b}", additional_headers=session_headers(alice)) as socket_b:
        assert api_a.post(f"approvals/{approval['id']}/decision", {"decision": "approve"}).status_code == 200
        receive_until(socket_b, 'data-status="succeeded"')
        receive_until(socket_b, "I did write a.txt")
    wait_for_status(conversation_id, "idle")


@pytest.fixture
def slow_site():
    """A page that takes half a second: a tool call that keeps a worker process busy."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self):
            threading.Event().wait(0.5)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"slow page")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://localhost:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_conversations_run_on_whichever_worker_is_free(e2e, second_web_and_worker, alice, agent, slow_site):
    _, worker2 = second_web_and_worker
    worker1 = e2e.processes["worker"]
    agent.fetch_allowlist, agent.allow_private_fetch = ["localhost"], True  # runs at once, no approval
    agent.save()
    before = (len(TASK_DONE.findall(worker1.log.read_text())), len(TASK_DONE.findall(worker2.log.read_text())))
    api = Api(e2e.base_url, alice)

    # Each conversation keeps a worker process busy for half a second; worker 1 takes at most two at
    # a time (prefetch 1, acks late), so the rest wait in Redis for whichever process is free.
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda i: api.post("conversations", {"agent": "demo", "message": f"fetch {slow_site}?n={i}"}).json()["id"], range(12)))

    wait_until(lambda: Conversation.objects.filter(pk__in=ids, status="idle").count() == len(ids), timeout=90, message="all answered")

    def ran() -> tuple[int, int]:
        after = (len(TASK_DONE.findall(worker1.log.read_text())), len(TASK_DONE.findall(worker2.log.read_text())))
        return after[0] - before[0], after[1] - before[1]

    # A task logs that it succeeded a moment after its last commit made the conversation idle.
    wait_until(lambda: sum(ran()) >= len(ids), timeout=10, message="every task's log line")
    assert min(ran()) > 0, f"advance tasks per worker: {ran()}"
    assert ToolCall.objects.filter(message__conversation_id__in=ids, status="succeeded").count() == len(ids)
