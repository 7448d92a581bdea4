"""Real parts for end-to-end tests: a redis-server, a `celery worker`, `celery beat` and daphne, all on
loopback, sharing the test database file with this process. Tests drive them over HTTP and
websockets and read the outcome from the database."""
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q

from bench.stack import BIN, Process, free_port, port_open  # noqa: F401  (also used by e2e tests)
from chat.models import ApiToken, Conversation, Message
from tests.conftest import wait_until
from tests.standins.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """The database pytest-django made for this session, for the other processes to share."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    return f"sqlite:///{db['NAME']}"


def start(name: str, args: list[str], env: dict, logs: Path) -> Process:
    log = logs / f"{name}.log"
    handle = log.open("w")
    popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    return Process(name, popen, log)


@dataclass
class Stack:
    base_url: str
    ws_url: str
    redis_url: str
    sandbox_root: Path
    processes: dict
    env: dict
    work: Path

    def logs(self) -> str:
        return "\n\n".join(f"--- {name} ---\n{p.tail()}" for name, p in self.processes.items())


@pytest.fixture(scope="session")
def stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """redis-server, a Celery worker (as the Procfile starts it: the pool of hitl/settings.py), Celery beat
    and daphne, for the whole session."""
    if not shutil.which("redis-server"):
        pytest.fail("redis-server is not installed: run bin/ensure-system-packages")
    work = tmp_path_factory.mktemp("e2e")
    redis_port, web_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = os.environ | {
        "DJANGO_SETTINGS_MODULE": "hitl.settings",
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": redis_url,
        "HITL_VAR_DIR": str(work / "var"),
        "HITL_SANDBOX_ROOT": str(work / "sandboxes"),
        "DEBUG": "1",
        # litellm's OpenAI provider insists on a key, even for the local fake model some tests use.
        "OPENAI_API_KEY": "test",
        # Quotas off: these runs start conversations far faster than a person does.
        "HITL_QUOTA_CONVERSATIONS_PER_HOUR": "0",
        "HITL_QUOTA_MESSAGES_PER_MINUTE": "0",
        "HITL_QUOTA_MODEL_CALLS_PER_HOUR": "0",
        "HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR": "0",
        "PYTHONUNBUFFERED": "1",
        # Beat expires approvals every half second; failed webhooks retry after 0.2 s, 0.4 s, ...
        "HITL_EXPIRY_SWEEP_SECONDS": "0.5",
        "HITL_WEBHOOK_BACKOFF": "0.2",
        "HITL_WEBHOOK_RETRIES": "3",
        # Reminders and escalations of routed approvals are swept every second (a delay of a few seconds).
        "HITL_ESCALATION_SWEEP_SECONDS": "1",
        # An AI reviewer that has not answered in 5 s hands its call to a person.
        "HITL_REVIEWER_SECONDS": "5",
    }
    processes = {}
    processes["redis"] = start(
        "redis",
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(work)],
        env,
        work,
    )
    wait_until(lambda: port_open(redis_port), timeout=10, message="redis-server")
    processes["worker"] = start(
        "worker",
        [str(BIN / "celery"), "-A", "hitl", "worker", "--loglevel", "INFO", "--without-mingle", "--without-gossip", "--hostname", "e2e@%h"],
        env,
        work,
    )
    processes["beat"] = start(
        "beat",
        [str(BIN / "celery"), "-A", "hitl", "beat", "--loglevel", "INFO", "--schedule", str(work / "beat-schedule")],
        env,
        work,
    )
    processes["web"] = start(
        "web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(web_port), "hitl.asgi:application"], env, work
    )
    stack = Stack(f"http://127.0.0.1:{web_port}", f"ws://127.0.0.1:{web_port}", redis_url, work / "sandboxes", processes, env, work)
    try:
        wait_until(lambda: port_open(web_port), timeout=30, message="daphne")
        # Ready, with litellm imported (chat.tasks warms it up before the worker consumes).
        wait_until(lambda: "ready." in processes["worker"].log.read_text(), timeout=60, message="celery worker")
        yield stack
    except BaseException:
        print(stack.logs())
        raise
    finally:
        for process in reversed(processes.values()):
            process.stop()


@pytest.fixture
def e2e(request, stack, transactional_db):
    """The stack, with this test's rows committed so the other processes see them."""
    request.node.stack_logs_from = {name: process.log.stat().st_size for name, process in stack.processes.items()}
    request.node.stack = stack
    yield stack
    for name, process in stack.processes.items():
        assert process.popen.poll() is None, f"{name} died:\n{process.tail()}"
    # A test may end before a worker has finished the step it started (say, once the card is on the
    # socket): wait for it, so the flush after the test (TRUNCATE on PostgreSQL) never meets its locks.
    advancing = Conversation.objects.filter(Q(status=Conversation.Status.RUNNING) | ~Q(advancing_token=""))
    wait_until(lambda: not advancing.exists(), timeout=30, message="the workers to finish what the test started")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing end-to-end test (or its teardown) prints what each process logged while it ran:
    a flaky failure then says what happened, not only what was not seen."""
    outcome = yield
    report = outcome.get_result()
    stack, starts = getattr(item, "stack", None), getattr(item, "stack_logs_from", None)
    if report.failed and stack is not None and starts is not None:
        if call.excinfo is not None and call.excinfo.errisinstance(httpx.TimeoutException):
            _dump_web_threads(stack)  # daphne did not answer: what was each of its threads doing?
        for name, process in stack.processes.items():
            report.sections.append((f"{name} log during this test", _logged_since(process.log, starts.get(name, 0))))


def _dump_web_threads(stack) -> None:
    """SIGUSR1 makes daphne print every thread's stack to its log (hitl/asgi.py)."""
    web = stack.processes.get("web")
    if web is None or web.popen.poll() is not None:
        return
    size = web.log.stat().st_size
    os.kill(web.popen.pid, signal.SIGUSR1)
    try:
        wait_until(lambda: web.log.stat().st_size > size, timeout=5, message="daphne's thread dump")
    except AssertionError:
        pass  # the log then says nothing more: the section below shows what there is


def _logged_since(log: Path, offset: int, lines: int = 80) -> str:
    with log.open("rb") as handle:
        handle.seek(offset)
        text = handle.read().decode(errors="replace")
    kept = text.splitlines()[-lines:]
    skipped = len(text.splitlines()) - len(kept)
    return (f"[{skipped} earlier lines left out]\n" if skipped else "") + "\n".join(kept)


# For the stacks that kill their own processes (test_crashes.py, test_faults.py): a lease of 3 s,
# sweeps every second, no retry of a model call, so that a recovery takes seconds.
FAST_RECOVERY = {"HITL_LOOP_LEASE_SECONDS": "3", "HITL_STALL_SECONDS": "1", "HITL_SWEEP_SECONDS": "1", "HITL_LLM_RETRIES": "0"}


@pytest.fixture
def fake_model():
    """A stand-in OpenAI server on loopback (tests/standins/fake_openai.py), for agents whose api_base is its URL."""
    fake = FakeOpenAI().start()
    yield fake
    fake.stop()


def status_of(conversation_id: str) -> str:
    return Conversation.objects.get(pk=conversation_id).status


def replies(conversation_id) -> list[str]:
    return list(Message.objects.filter(conversation_id=conversation_id, role="assistant").values_list("content", flat=True))


class Api:
    """An HTTP client for the JSON API on daphne, with a bearer token."""

    def __init__(self, base_url: str, user: User):
        self.http = httpx.Client(
            base_url=f"{base_url}/api/", headers={"Authorization": f"Bearer {ApiToken.issue(user)}"}, timeout=10
        )

    def get(self, path: str, **params) -> httpx.Response:
        return self.http.get(path, params=params)

    def post(self, path: str, body: dict | None = None) -> httpx.Response:
        return self.http.post(path, json=body)


@pytest.fixture
def api_for(e2e):
    clients = []

    def make(user: User) -> Api:
        clients.append(Api(e2e.base_url, user))
        return clients[-1]

    yield make
    for client in clients:
        client.http.close()
