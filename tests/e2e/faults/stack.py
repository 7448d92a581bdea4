"""The stack the fault matrices kill processes of (test_faults.py beside it, and the pages'
row in test_faults_browser.py): redis-server, two workers, beat and daphne of their own."""
import os
import signal
import time
import uuid
from collections import Counter

import pytest
import redis
from celery import Celery

from tests.conftest import wait_until
from tests.e2e.conftest import BIN, FAST_RECOVERY, free_port, port_open, start

CONSUMES_AGAIN_SECONDS = 15  # the bound, per worker
OUTAGE_SECONDS = 2  # how long each process stays down: the fault itself, not a wait for anything
WORKERS = ("a", "b")


class FaultStack:
    """redis-server, two workers (each also consuming a probe queue of its own), beat and daphne."""

    def __init__(self, env: dict, work, web_port: int, redis_port: int):
        self.env, self.work, self.web_port, self.redis_port = env, work, web_port, redis_port
        self.base_url = f"http://127.0.0.1:{web_port}"
        self.redis_url = env["REDIS_URL"]
        self.processes: dict = {}
        self.starts = Counter()

    def commands(self, name: str) -> list[str]:
        if name == "redis":
            return ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.work)]
        if name == "beat":
            return [str(BIN / "celery"), "-A", "hitl", "beat", "--schedule", str(self.work / "beat-schedule")]
        if name == "daphne":
            return [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(self.web_port), "hitl.asgi:application"]
        worker = name.removeprefix("worker-")  # the app plus bench.ping, the probe task
        return [str(BIN / "celery"), "-A", "bench.worker_app", "worker", "--loglevel", "INFO", "--without-mingle",
                "--without-gossip", "--hostname", f"fault-{worker}-{os.getpid()}@%h", "--queues", f"celery,probe.{worker}"]

    def start(self, name: str) -> None:
        self.starts[name] += 1
        process = start(f"fault-{name}-{self.starts[name]}", self.commands(name), self.env, self.work)
        self.processes[name] = process
        if name == "redis":
            wait_until(lambda: port_open(self.redis_port), timeout=10, message="fault redis-server")
        elif name == "daphne":
            wait_until(lambda: port_open(self.web_port), timeout=30, message="fault daphne")
        elif name.startswith("worker-"):
            wait_until(lambda: "ready." in process.log.read_text(), timeout=60, message=f"fault {name}")

    def kill(self, name: str) -> None:
        process = self.processes[name]
        process.popen.send_signal(signal.SIGKILL)
        process.popen.wait()

    def names(self, fault: str) -> list[str]:
        return [f"worker-{w}" for w in WORKERS] if fault == "workers" else [fault]

    def probe(self, worker: str, deadline: float) -> None:
        """A task on `worker`'s own queue, answered (bench.ping pushes its key) before `deadline`."""
        key = f"fault-probe:{uuid.uuid4().hex}"
        seconds = max(1, int(deadline - time.monotonic()) + 1)
        client = redis.Redis.from_url(self.redis_url, socket_timeout=seconds + 5)
        with Celery(broker=self.redis_url) as app:
            app.send_task("bench.ping", args=[key], queue=f"probe.{worker}")
        try:
            answered = client.blpop([key], timeout=seconds)
        except redis.TimeoutError:
            answered = None
        finally:
            client.close()
        if answered is None or time.monotonic() > deadline + 1:
            process = self.processes[f"worker-{worker}"]
            raise AssertionError(f"worker {worker} did not consume its own queue within {CONSUMES_AGAIN_SECONDS} s:\n{process.tail()}")

    def tails(self) -> str:
        return "\n".join(f"--- {name} ---\n{process.tail(25)}" for name, process in self.processes.items())


@pytest.fixture(scope="module")
def fault_stack(stack, tmp_path_factory):
    work = tmp_path_factory.mktemp("faults")
    redis_port, web_port = free_port(), free_port()
    env = stack.env | FAST_RECOVERY | {"REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"}
    faults = FaultStack(env, work, web_port, redis_port)
    for name in ("redis", "beat", "daphne", *(f"worker-{w}" for w in WORKERS)):
        faults.start(name)
    yield faults
    for process in faults.processes.values():
        process.stop()
