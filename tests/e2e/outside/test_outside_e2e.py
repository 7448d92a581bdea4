"""Approval requests from outside on a stack whose parts break: a long poll (GET
/api/approvals/{id}?wait=N) gets the decision even with the Celery worker dead (the decision's pushes
then never come: the poll reads the row again every second), and a daphne restarted during a long
poll loses nothing: the poll fails clearly, the approval is still there, and the next poll gets the
decision. Runs on the crash stack of test_crashes (its own daphne, worker and redis)."""
import signal
import threading
import time

import httpx
import pytest

from approvals.models import Approval
from tests.conftest import wait_until
from tests.e2e.conftest import BIN, Api, port_open, start
from tests.e2e.faults.test_crashes import crash, crash_stack  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


def request_deploy(api: Api) -> dict:
    response = api.post("approval-requests", {"agent": "demo", "tool": "deploy", "arguments": {"service": "web"}, "thread": "release"})
    assert response.status_code == 201, response.text
    return response.json()


class LongPoll(threading.Thread):
    """GET /api/approvals/{id}?wait=N in a thread of its own: what came back (or what went wrong)."""

    def __init__(self, api: Api, approval_id: int, wait: int):
        super().__init__(daemon=True)
        self.api, self.approval_id, self.wait = api, approval_id, wait
        self.response: httpx.Response | None = None
        self.error: Exception | None = None
        self.took = 0.0

    def run(self) -> None:
        started = time.monotonic()
        try:
            self.response = self.api.http.get(f"approvals/{self.approval_id}", params={"wait": self.wait}, timeout=self.wait + 10)
        except httpx.HTTPError as exc:
            self.error = exc
        self.took = time.monotonic() - started


def test_a_long_poll_gets_the_decision_with_the_worker_dead(crash, alice, bob, gated_deploy):
    requested = request_deploy(Api(crash.base_url, alice))
    crash.kill_worker()  # nothing will announce the decision: no push reaches the poll
    poll = LongPoll(Api(crash.base_url, alice), requested["id"], wait=30)
    poll.start()
    time.sleep(0.5)  # the poll is waiting (a decision before it would only answer it sooner)

    decided = Api(crash.base_url, bob).post(f"approvals/{requested['id']}/decision", {"decision": "approve", "shown_hash": requested["shown_hash"]})
    decided_at = time.monotonic()
    poll.join(timeout=40)

    assert decided.status_code == 200, decided.text
    assert poll.error is None and poll.response is not None and poll.response.status_code == 200
    assert poll.response.json()["status"] == "approved"
    assert time.monotonic() - decided_at < 5, "the poll answers within about a second of the decision"
    crash.start_worker()  # the fixture stops the worker it started


def test_a_daphne_restarted_during_a_long_poll_loses_nothing(crash, alice, bob, gated_deploy):
    requested = request_deploy(Api(crash.base_url, alice))
    poll = LongPoll(Api(crash.base_url, alice), requested["id"], wait=30)
    poll.start()
    time.sleep(0.5)

    web = crash.processes["web"]
    port = int(crash.base_url.rsplit(":", 1)[1])
    web.popen.send_signal(signal.SIGKILL)
    web.popen.wait()
    poll.join(timeout=20)
    assert poll.response is None and isinstance(poll.error, httpx.HTTPError), "the poll fails clearly, not with a wrong answer"
    assert Approval.objects.get(pk=requested["id"]).status == Approval.Status.PENDING
    crash.processes["web"] = start("crash-web-again", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"], crash.env, crash.work)
    wait_until(lambda: port_open(port), timeout=30, message="daphne, started again")

    again = LongPoll(Api(crash.base_url, alice), requested["id"], wait=30)
    again.start()
    time.sleep(0.5)
    Api(crash.base_url, bob).post(f"approvals/{requested['id']}/decision", {"decision": "reject", "reason": "not now", "shown_hash": requested["shown_hash"]})
    again.join(timeout=40)

    assert again.error is None and again.response.status_code == 200
    assert (again.response.json()["status"], again.response.json()["rejection_reason"]) == ("rejected", "not now")
