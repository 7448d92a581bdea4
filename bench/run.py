#!/usr/bin/env python
"""hitl's benchmarks (issue 6), all in one run so that every figure sits beside the floors it is
divided by. See bench/README.md.

    python bench/run.py            # everything (about 3 minutes on 2 cores), prints a table
    python bench/run.py --smoke    # a few iterations of each measurement, no peers, small scale (~30 s)
    python bench/run.py --concurrency-only   # only "many people at once" (section 7), with LangGraph beside it

It starts its own redis-server, Celery worker and beat, and daphne, on free loopback ports, with a
fresh SQLite file in a temporary directory (or a fresh PostgreSQL database beside the one
DATABASE_URL names), measures, prints, and stops everything. It is never a test: nothing here fails
because something is slow; it fails only when something does not work.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import platform
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone as dt_timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP_VENV = ROOT / ".venv"
BENCH_VENV = Path(os.environ.get("HITL_BENCH_VENV", ROOT / ".venv-bench"))
BULK_DECISIONS = 1000  # ids in one POST /api/approvals/decisions, the route's limit


def _reexec_in_app_venv() -> None:
    """`python bench/run.py` works with any python: it re-runs itself with the app's virtualenv."""
    try:
        import django  # noqa: F401
        import httpx  # noqa: F401
        import websockets  # noqa: F401
    except ImportError:
        python = APP_VENV / "bin" / "python"
        if python.exists() and Path(sys.prefix).resolve() != APP_VENV.resolve():
            os.execv(str(python), [str(python), *sys.argv])
        raise SystemExit("Run with the app's virtualenv and its dev requirements: .venv/bin/python bench/run.py")


_reexec_in_app_venv()
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from bench.concurrency import failed_anything  # noqa: E402
from bench.concurrency_report import concurrency_report, concurrency_targets  # noqa: E402
from bench.stack import Stack, children, create_postgres_database, is_postgres, load, log, wait_until  # noqa: E402


def children_of_worker(stack: Stack) -> list[int]:
    return children(stack.processes["worker"].popen.pid)

# --- Configuration ----------------------------------------------------------------------------------


@dataclass
class Config:
    smoke: bool
    iterations: int  # cycles (gate, decision, whole cycle) measured on our stack
    floor_samples: int  # floor samples taken beside each cycle
    series: list[int]  # numbers of waiting conversations for the latency plot
    series_iterations: int
    scale: int  # conversations waiting at once in the scale test
    scale_workers: list[int | None]
    rows: int  # approval records for the page timings
    page_requests: int
    peers: bool
    peer_iterations: int
    plot: Path | None
    json_path: Path | None
    profile: bool
    keep: bool
    debug: bool
    concurrency: bool  # section 7, many people at once
    concurrency_only: bool
    concurrency_starts: list[int]  # conversations started at once, one run each (the plot's x)
    concurrency_resume: int  # conversations waiting, then approved all at once
    concurrency_stream: int  # conversations started at once on a streaming model, frames counted
    concurrency_plot: Path | None
    model_latency: float = 2.0  # seconds before each answer of the local model server
    stream_tokens_per_second: float = 50.0
    client_threads: int = 8


def parse_args() -> Config:
    parser = argparse.ArgumentParser(description="hitl's benchmarks; prints a table (see bench/README.md).")
    parser.add_argument("--smoke", action="store_true", help="a handful of iterations, no peers, small scale (< 60 s)")
    parser.add_argument("--iterations", type=int, help="cycles on our stack (default 40; smoke 3)")
    parser.add_argument("--scale", type=int, help="conversations waiting at once (default 1000; smoke 20)")
    parser.add_argument("--rows", type=int, help="approval records for the pages (default 100000; smoke 1000)")
    parser.add_argument("--series", help="waiting conversations for the plot, comma-separated (default 0,100,1000,10000)")
    parser.add_argument("--no-peers", action="store_true", help="skip LangGraph, Pydantic AI and the OpenAI Agents SDK")
    parser.add_argument("--plot", type=Path, help="where to write the plot (default docs/bench-latency.png; none in smoke)")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--json", type=Path, help="also write every figure and sample as JSON here")
    parser.add_argument("--profile", action="store_true", help="py-spy the worker and daphne during the scale test")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, database)")
    parser.add_argument("--debug", action="store_true", help="DEBUG=1 as in tests/e2e (default: DEBUG=0, production settings)")
    parser.add_argument("--concurrency-only", action="store_true", help="only section 7, many people at once (with LangGraph unless --no-peers)")
    parser.add_argument("--no-concurrency", action="store_true", help="skip section 7")
    parser.add_argument("--concurrency-sizes", help="conversations started at once, comma-separated (default 10,100,300,1000; smoke 10,20)")
    parser.add_argument("--concurrency-resume", type=int, help="conversations waiting, then approved all at once (default 1000; smoke 20)")
    parser.add_argument("--model-latency", type=float, default=2.0, help="seconds the local model server takes per answer (default 2)")
    args = parser.parse_args()
    smoke = args.smoke
    plot = None if (args.no_plot or (smoke and not args.plot)) else (args.plot or ROOT / "docs" / "bench-latency.png")
    starts = [int(n) for n in (args.concurrency_sizes or ("10,20" if smoke else "10,100,300,1000")).split(",")]
    return Config(
        smoke=smoke,
        iterations=args.iterations or (3 if smoke else 40),
        floor_samples=2 if smoke else 5,
        series=[int(n) for n in (args.series or ("0,20" if smoke else "0,100,1000,10000")).split(",")],
        series_iterations=2 if smoke else 12,
        scale=args.scale or (20 if smoke else 1000),
        # None: the workers as `make run` starts them (the Procfile's line, HITL_WORKERS times).
        scale_workers=[2] if smoke else [1, 2, None],
        rows=args.rows or (1000 if smoke else 100_000),
        page_requests=3 if smoke else 25,
        peers=not (smoke or args.no_peers),
        peer_iterations=30,
        plot=plot,
        json_path=args.json,
        profile=args.profile,
        keep=args.keep,
        debug=args.debug,
        concurrency=not args.no_concurrency,
        concurrency_only=args.concurrency_only,
        concurrency_starts=starts,
        concurrency_resume=args.concurrency_resume or (20 if smoke else 1000),
        concurrency_stream=10 if smoke else 100,
        concurrency_plot=None if (args.no_plot or smoke) else ROOT / "docs" / "bench-concurrency.png",
        model_latency=args.model_latency,
    )


# --- Small helpers --------------------------------------------------------------------------------------


def p50(values) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[94]


def summary(values_ms: list[float]) -> dict:
    return {"n": len(values_ms), "p50": p50(values_ms), "p95": p95(values_ms), "samples": values_ms}


class Socket:
    """A websocket client whose frames are timestamped (time.time()) by a reader thread as they
    arrive, so a request sent from the main thread and the frame it causes are timed apart."""

    def __init__(self, url: str, cookie: str, origin: str):
        self.ws = connect(url, origin=origin, additional_headers={"Cookie": cookie}, max_size=None, open_timeout=10)
        self.frames: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                text = self.ws.recv()
                self.frames.put((time.time(), text))
        except Exception as exc:  # closed
            self.frames.put((time.time(), exc))

    def wait_for(self, predicate, timeout: float = 60) -> tuple[float, str]:
        deadline = time.monotonic() + timeout
        seen = []  # what came instead, for the error: a bench that fails says what it saw
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise queue.Empty
                at, text = self.frames.get(timeout=remaining)
            except queue.Empty:
                shown = "\n".join(frame[:300] for frame in seen[-5:]) or "(no frame at all)"
                raise TimeoutError(f"no matching frame in {timeout:g} s; the last of {len(seen)} others:\n{shown}") from None
            if isinstance(text, str):
                seen.append(text)
            if isinstance(text, Exception):
                raise RuntimeError(f"the websocket closed: {text!r}")
            if predicate(text):
                return at, text

    def close(self) -> None:
        self.ws.close()


# --- The benchmark ----------------------------------------------------------------------------------------


class Bench:
    def __init__(self, config: Config, stack: Stack):
        self.config, self.stack = config, stack
        self.results: dict = {"config": {k: str(v) for k, v in vars(config).items()}}

    # -- setup --

    def setup_django(self) -> None:
        os.environ.update(self.stack.env())
        import django

        django.setup()
        from django.core.management import call_command

        from core import live

        live.use_own_loop()  # as in a Celery worker (hitl/celery.py), for the "as the app does" push floor

        call_command("migrate", verbosity=0)
        if not self.config.debug:
            call_command("collectstatic", "--no-input", verbosity=0)  # DEBUG=0 serves the manifest
        from django.contrib.auth.models import User
        from django.test import Client

        from approvals.permissions import approvers_group
        from chat.demo import ensure_demo_agent
        from chat.models import ApiToken

        self.agent = ensure_demo_agent()
        self.owner = User.objects.create_user("bench", password="bench-password")
        self.approver = User.objects.create_user("approver", password="approver-password")
        self.approver.groups.add(approvers_group())
        self.approver = User.objects.get(pk=self.approver.pk)
        self.owner_token = ApiToken.issue(self.owner)
        self.approver_token = ApiToken.issue(self.approver)
        self.cookies = {}
        for user in (self.owner, self.approver):
            client = Client()
            client.force_login(user)
            self.cookies[user.username] = f"sessionid={client.cookies['sessionid'].value}"

    def start_processes(self, worker_processes: int | None = 2) -> None:
        """`worker_processes`: a prefork pool of that many, or None for the worker as the Procfile starts it."""
        import redis

        from hitl.celery import app as celery_app

        what = f"{worker_processes} processes" if worker_processes else "as the Procfile starts it"
        log(f"starting the Celery worker ({what}), beat and daphne")
        self.stack.start_worker(worker_processes)
        self.stack.start_beat()
        self.stack.start_daphne()
        self.redis = redis.Redis.from_url(self.stack.redis_url, socket_timeout=None)  # redis-py 8 defaults to 5 s
        self.celery = celery_app
        self.api = self.http_client(self.owner_token)
        self.layer_loop = LayerLoop()
        for _ in range(3):  # the first of everything opens connections
            self.celery_ping()

    def http_client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=f"{self.stack.base_url}/api/", headers={"Authorization": f"Bearer {token}"}, timeout=60)

    def open_socket(self, conversation_id, user="bench") -> Socket:
        return Socket(f"{self.stack.ws_url}/ws/conversations/{conversation_id}/", self.cookies[user], self.stack.base_url)

    def bare_conversation(self, title: str = "bench"):
        from chat.models import Conversation

        return Conversation.objects.create(owner=self.owner, agent=self.agent, title=title)

    # -- 1. floors --

    def db_commit(self, conversation_id) -> float:
        from django.db import transaction
        from django.utils import timezone

        from chat.models import Conversation

        t0 = time.perf_counter()
        with transaction.atomic():  # BEGIN IMMEDIATE; one UPDATE; COMMIT (WAL, synchronous=NORMAL)
            Conversation.objects.filter(pk=conversation_id).update(updated_at=timezone.now())
        return (time.perf_counter() - t0) * 1000

    def redis_round_trip(self) -> float:
        t0 = time.perf_counter()
        self.redis.ping()
        return (time.perf_counter() - t0) * 1000

    def celery_ping(self) -> float:
        key = f"bench:ping:{uuid.uuid4().hex}"
        t0 = time.perf_counter()
        self.celery.send_task("bench.ping", args=[key])
        if self.redis.blpop([key], timeout=30) is None:
            raise RuntimeError("bench.ping did not come back")
        return (time.perf_counter() - t0) * 1000

    def commit_and_enqueue(self, conversation_id) -> float:
        """What a decision request must do at the least: commit, then hand one task to the broker."""
        t0 = time.perf_counter()
        self.db_commit(conversation_id)
        self.celery.send_task("bench.ping", args=[f"bench:enqueued:{uuid.uuid4().hex}"])
        return (time.perf_counter() - t0) * 1000

    def push(self, socket: Socket, group: str, via_app: bool = False) -> float:
        marker = f"bench-{uuid.uuid4().hex}"
        html = f'<i data-bench="{marker}"></i>'
        t0 = time.time()
        if via_app:
            from core import live

            live.push_now(group, html)  # exactly as the worker does
        else:
            self.layer_loop.group_send(group, {"type": "html.push", "html": html})
        at, _ = socket.wait_for(lambda text: marker in text, timeout=30)
        return (at - t0) * 1000

    def one_hop(self, socket: Socket, conversation_id, group: str) -> float:
        t0 = time.time()
        self.db_commit(conversation_id)
        self.redis_round_trip()
        self.celery_ping()
        marker = f"bench-{uuid.uuid4().hex}"
        self.layer_loop.group_send(group, {"type": "html.push", "html": f'<i data-bench="{marker}"></i>'})
        at, _ = socket.wait_for(lambda text: marker in text, timeout=30)
        return (at - t0) * 1000

    def floor_samples(self, floors: dict, probe, socket: Socket, group: str, n: int) -> None:
        for _ in range(n):
            commit = self.db_commit(probe.pk)
            rtt = self.redis_round_trip()
            floors["commit"].append(commit)
            floors["redis"].append(rtt)
            floors["commit_redis"].append(commit + rtt)
            floors["celery"].append(self.celery_ping())
            floors["commit_enqueue"].append(self.commit_and_enqueue(probe.pk))
            floors["push"].append(self.push(socket, group))
            floors["push_app"].append(self.push(socket, group, via_app=True))
            floors["one_hop"].append(self.one_hop(socket, probe.pk, group))

    # -- 2.-4. gate, decision, cycle --

    def cycle(self, index: int) -> dict:
        """message → card → approve → tool finished → final answer, on a fresh conversation with its
        socket already open (the socket's connection is not timed)."""
        from approvals.models import Approval

        conversation = self.bare_conversation()
        socket = self.open_socket(conversation.pk)
        try:
            name = f"c{index}.txt"
            t_message = time.time()
            response = self.api.post(f"conversations/{conversation.pk}/messages", json={"content": f"write hi to {name}"})
            assert response.status_code == 202, response.text
            t_card, card = socket.wait_for(lambda f: 'data-status="pending_approval"' in f)
            approval_id = int(re.search(r'id="approval-(\d+)"', card)[1])  # what a page's Approve button posts to
            t_decision = time.time()
            response = self.api.post(f"approvals/{approval_id}/decision", json={"decision": "approve"})
            t_decision_response = time.time()
            assert response.status_code == 200, response.text
            t_tool_done, _ = socket.wait_for(lambda f: 'data-status="succeeded"' in f)
            t_final, final = socket.wait_for(lambda f: "message-assistant" in f and "I did write" in f)
            if 'data-status="idle"' not in final:  # the final answer comes with the idle status, in one frame
                socket.wait_for(lambda f: 'id="conversation-status"' in f and 'data-status="idle"' in f)
        finally:
            socket.close()
        approval = Approval.objects.get(pk=approval_id)
        requested_at = approval.requested_at.timestamp()
        assert (self.stack.work / "sandboxes" / str(conversation.pk) / name).read_text() == "hi"
        return {
            "gate": (t_card - requested_at) * 1000,
            "message_to_card": (t_card - t_message) * 1000,
            "decision_to_tool_done": (t_tool_done - t_decision) * 1000,
            "decision": (t_final - t_decision) * 1000,
            "decision_http": (t_decision_response - t_decision) * 1000,
            "cycle": (t_final - t_message) * 1000,
        }

    def latencies(self) -> None:
        """Floors and cycles interleaved: each cycle is measured beside fresh floor samples."""
        n = self.config.iterations
        log(f"floors and {n} cycles, interleaved (load {load()})")
        probe = self.bare_conversation("probe")
        socket = self.open_socket(probe.pk)
        group = f"conversation.{probe.pk}"
        floors = {k: [] for k in ("commit", "redis", "commit_redis", "celery", "commit_enqueue", "push", "push_app", "one_hop")}
        cycles = {k: [] for k in ("gate", "message_to_card", "decision_to_tool_done", "decision", "decision_http", "cycle")}
        self.floor_samples(floors, probe, socket, group, 3)  # warm-up, thrown away
        self.cycle(-1)
        self.cycle(-2)
        floors = {k: [] for k in floors}
        for i in range(n):
            self.floor_samples(floors, probe, socket, group, self.config.floor_samples)
            for key, value in self.cycle(i).items():
                cycles[key].append(value)
        socket.close()
        self.stack.check()
        self.results["floors"] = {k: summary(v) for k, v in floors.items()}
        self.results["loop"] = {k: summary(v) for k, v in cycles.items()}

    # -- 4. peers --

    def peers(self) -> None:
        if not self.config.peers:
            return
        python = ensure_bench_venv()
        self.results["peers"] = {}
        for peer in ("langgraph", "pydantic-ai", "openai-agents"):
            log(f"peer {peer} (load {load()})")
            scratch = Path(tempfile.mkdtemp(prefix=f"peer-{peer}-", dir=self.stack.work))
            output = subprocess.run(
                [str(python), str(ROOT / "bench" / "peers.py"), peer, "--iterations", str(self.config.peer_iterations),
                 "--dir", str(scratch)],
                capture_output=True, text=True, timeout=600, env=os.environ | {"OPENAI_API_KEY": "sk-offline"},
            )
            if output.returncode != 0:
                raise RuntimeError(f"peer {peer} failed:\n{output.stderr[-3000:]}")
            result = json.loads(output.stdout)
            self.results["peers"][peer] = result | {"cycle": summary(result["cycle_ms"])}

    # -- 7. many people at once (before the scale test: the database is still small) --

    def concurrency(self) -> None:
        if not self.config.concurrency:
            return
        from bench.concurrency import Concurrency

        config = self.config
        self.results["concurrency"] = Concurrency(
            self, starts=config.concurrency_starts, resume=config.concurrency_resume, stream=config.concurrency_stream,
            latency=config.model_latency, tokens_per_second=config.stream_tokens_per_second,
            peer_python=ensure_bench_venv() if config.peers else None,
        ).run()

    # -- 5. scale --

    def scale(self, workers: int | None, profile: bool = False) -> dict:
        """`workers`: a prefork pool of that many processes, or None for the workers as `make run` starts them."""
        from chat.models import Conversation
        from approvals.models import Approval

        n = self.config.scale
        log(f"scale: {n} conversations, {workers or 'make run'} worker process(es) (load {load()})")
        self.stack.stop_worker()
        self.stack.start_worker(workers)
        worker = self.stack.workers[0]
        self.celery_ping()
        title = f"scale-{workers or 'procfile'}-{uuid.uuid4().hex[:6]}"
        conversations = Conversation.objects.bulk_create(
            [Conversation(owner=self.owner, agent=self.agent, title=title) for _ in range(n)]
        )
        ids = [str(c.pk) for c in conversations]
        of_round = Conversation.objects.filter(title=title)
        profiler = Profiler(self.stack, f"scale{workers}") if profile else None

        t0 = time.time()
        self.concurrently([("post", f"conversations/{cid}/messages", {"content": f"write hi to s{i}.txt"}) for i, cid in enumerate(ids)], 202)
        t_posted = time.time()
        wait_until(lambda: of_round.filter(status=Conversation.Status.WAITING_FOR_APPROVAL).count() == n, 600,
                   f"{n} conversations waiting", interval=0.05)
        t_waiting = time.time()
        approval_ids = list(Approval.objects.filter(conversation__title=title, status=Approval.Status.PENDING).values_list("pk", flat=True))
        assert len(approval_ids) == n, len(approval_ids)

        if profiler:
            profiler.start()
        t1 = time.time()
        # Approve-all through the API: one request per BULK_DECISIONS approvals (the route's limit).
        self.concurrently([("post", "approvals/decisions", {"ids": approval_ids[i:i + BULK_DECISIONS], "decision": "approve"})
                           for i in range(0, n, BULK_DECISIONS)], 200)
        t_submitted = time.time()
        wait_until(lambda: of_round.filter(status=Conversation.Status.IDLE).count() == n, 900, f"{n} conversations finished", interval=0.05)
        t_done = time.time()
        if profiler:
            profiler.stop()
        failed = of_round.exclude(status=Conversation.Status.IDLE).count()
        assert failed == 0, f"{failed} conversations did not finish"
        self.stack.check()
        result = {
            "workers": workers,
            "procfile": None if workers else {"processes": len(self.stack.workers), "pool": worker.pool, "concurrency": worker.concurrency},
            "conversations": n,
            "posted_s": t_posted - t0,
            "all_waiting_s": t_waiting - t0,
            "decisions_submitted_s": t_submitted - t1,
            "all_finished_s": t_done - t1,
            "worker_memory": self.stack.worker_memory(),
            "daphne_memory": self.stack.daphne_memory(),
            "profile": profiler.summary() if profiler else None,
        }
        log(f"  all waiting after {result['all_waiting_s']:.1f} s; all finished {result['all_finished_s']:.1f} s after the first decision")
        return result

    def concurrently(self, requests: list[tuple], expected_status: int) -> None:
        local = threading.local()

        def send(request):
            if not hasattr(local, "client"):
                local.client = self.http_client(self.owner_token)
            method, path, body = request
            response = local.client.post(path, json=body)
            if response.status_code != expected_status:
                raise RuntimeError(f"{path}: {response.status_code} {response.text[:300]}")

        with concurrent.futures.ThreadPoolExecutor(self.config.client_threads) as pool:
            for future in [pool.submit(send, r) for r in requests]:
                future.result()

    def scale_tests(self) -> None:
        self.results["scale"] = [self.scale(w) for w in self.config.scale_workers]
        if self.config.profile:  # a run of its own: py-spy takes CPU from the 2 cores it measures
            self.results["scale"].append(self.scale(2, profile=True))
        if len(children_of_worker(self.stack)) != 2:
            self.stack.stop_worker()
            self.stack.start_worker(2)

    # -- the plot: latency against waiting conversations --

    def series(self) -> None:
        from chat.models import Conversation

        points = []
        for target in sorted(self.config.series):
            waiting = Conversation.objects.filter(status=Conversation.Status.WAITING_FOR_APPROVAL).count()
            if target > waiting:
                insert_waiting(self, target - waiting)
            waiting = Conversation.objects.filter(status=Conversation.Status.WAITING_FOR_APPROVAL).count()
            log(f"series: {waiting} conversations waiting, {self.config.series_iterations} cycles (load {load()})")
            probe = self.bare_conversation("probe")
            socket = self.open_socket(probe.pk)
            floors = {k: [] for k in ("commit", "redis", "commit_redis", "celery", "commit_enqueue", "push", "push_app", "one_hop")}
            samples = {"gate": [], "decision": [], "cycle": []}
            self.cycle(-1)
            for i in range(self.config.series_iterations):
                self.floor_samples(floors, probe, socket, f"conversation.{probe.pk}", 1)
                sample = self.cycle(10_000 + i)
                for key in samples:
                    samples[key].append(sample[key])
            socket.close()
            points.append({"waiting": waiting, **{k: summary(v) for k, v in samples.items()},
                           "push_floor": summary(floors["push"]), "one_hop_floor": summary(floors["one_hop"])})
        self.results["series"] = points

    # -- 6. pages --

    def pages(self) -> None:
        from approvals.models import Approval
        from chat.models import Conversation

        measured = []
        insert_history(self, 10)  # one ten-turn conversation for the chat page, at both sizes
        self.chat_conversation = Conversation.objects.filter(title="history").first()
        measured.append(self.measure_pages(Approval.objects.count()))
        insert_history(self, self.config.rows - Approval.objects.count())
        measured.append(self.measure_pages(Approval.objects.count()))
        self.results["pages"] = measured

    def page_targets(self) -> list[tuple]:
        conversation = self.chat_conversation
        return [
            ("dashboard /approvals/", "/approvals/", "approver", None),
            ("chat page (10 turns)", f"/conversations/{conversation.pk}/", "bench", None),
            ("GET /api/approvals", "/api/approvals", None, self.approver_token),
            ("GET /api/approvals?status=pending", "/api/approvals?status=pending", None, self.approver_token),
            ("conversation list /", "/", "bench", None),
        ]

    def measure_pages(self, rows: int) -> dict:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        log(f"pages at {rows} approval records (load {load()})")
        out = {"rows": rows, "pages": []}
        clients = {}
        for user in (self.owner, self.approver):
            client = Client(HTTP_HOST="127.0.0.1")
            client.force_login(user)
            clients[user.username] = client
        for label, path, user, token in self.page_targets():
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            in_process, queries, sql_ms = [], [], []
            client = clients[user or "approver"]
            for i in range(self.config.page_requests + 2):
                timer = QueryTimer()
                with CaptureQueriesContext(connection) as captured, connection.execute_wrapper(timer):
                    t0 = time.perf_counter()
                    response = client.get(path, headers=headers)
                    elapsed = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, (path, response.status_code)
                if i >= 2:
                    in_process.append(elapsed)
                    queries.append(len(captured.captured_queries))
                    sql_ms.append(timer.ms)
            via_daphne = []
            http_headers = headers | ({"Cookie": self.cookies[user]} if user else {})
            with httpx.Client(base_url=self.stack.base_url, headers=http_headers, timeout=60) as http:
                for i in range(self.config.page_requests + 2):
                    t0 = time.perf_counter()
                    response = http.get(path)
                    elapsed = (time.perf_counter() - t0) * 1000
                    assert response.status_code == 200, (path, response.status_code, response.text[:200])
                    if i >= 2:
                        via_daphne.append(elapsed)
            out["pages"].append({
                "page": label, "path": path,
                "in_process": summary(in_process), "queries": max(queries), "queries_min": min(queries),
                "sql_ms": summary(sql_ms),
                "via_daphne": summary(via_daphne), "bytes": len(response.content),
            })
        return out


class QueryTimer:
    """A database execute wrapper that adds up the time spent in the database driver."""

    def __init__(self):
        self.ms = 0.0

    def __call__(self, execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.ms += (time.perf_counter() - t0) * 1000


class LayerLoop:
    """One event loop in a thread of its own, so a bare group_send is timed: the floor. (A worker
    pushes the same way, core/live.py, plus rendering nothing and its retry guard: `push_app`.)"""

    def __init__(self):
        import asyncio

        from channels.layers import get_channel_layer

        self.asyncio = asyncio
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.layer = get_channel_layer()

    def group_send(self, group: str, message: dict) -> None:
        self.asyncio.run_coroutine_threadsafe(self.layer.group_send(group, message), self.loop).result(timeout=30)


# --- Rows inserted directly ---------------------------------------------------------------------------


def insert_waiting(bench: Bench, count: int, batch: int = 1000) -> None:
    """`count` conversations waiting for approval, as the loop leaves them: a user message, an
    assistant turn with one gated write_file call pending approval, its pending Approval."""
    from django.db import transaction
    from django.utils import timezone

    from approvals.models import Approval
    from chat.models import Conversation, Message, ToolCall
    from chat.tools import arguments_hash

    log(f"inserting {count} waiting conversations")
    arguments = {"path": "w.txt", "content": "hi"}
    digest = arguments_hash(arguments)
    for start in range(0, count, batch):
        size = min(batch, count - start)
        now = timezone.now()
        with transaction.atomic():
            conversations = Conversation.objects.bulk_create([
                Conversation(owner=bench.owner, agent=bench.agent, title="waiting", status=Conversation.Status.WAITING_FOR_APPROVAL)
                for _ in range(size)
            ])
            messages = Message.objects.bulk_create(
                [Message(conversation=c, position=1, role="user", content="write hi to w.txt", author=bench.owner) for c in conversations]
                + [Message(conversation=c, position=2, role="assistant", content="") for c in conversations]
            )
            calls = ToolCall.objects.bulk_create([
                ToolCall(message=m, position=0, call_id="call_0_0", name="write_file", arguments=arguments,
                         raw_arguments=json.dumps(arguments), arguments_hash=digest, status="pending_approval", is_gated=True)
                for m in messages[size:]
            ])
            Approval.objects.bulk_create([
                Approval(tool_call=call, conversation=c, requested_by=bench.owner, reason="write_file needs approval.",
                         risk="medium", arguments_hash=digest, requested_at=now)
                for call, c in zip(calls, conversations)
            ])


def insert_history(bench: Bench, count: int, per_conversation: int = 10, batch_conversations: int = 500) -> None:
    """`count` decided approvals, ten per conversation (ten turns of write → approve → done), spread
    over the last 30 days: the history a busy instance piles up."""
    if count <= 0:
        return
    from django.db import transaction
    from django.utils import timezone

    from approvals.models import Approval
    from chat.models import Conversation, Message, ToolCall
    from chat.tools import arguments_hash

    log(f"inserting {count} decided approvals")
    t0 = time.time()
    now = timezone.now()
    made = 0
    while made < count:
        conversations_n = min(batch_conversations, -(-(count - made) // per_conversation))
        with transaction.atomic():
            conversations = Conversation.objects.bulk_create([
                Conversation(owner=bench.owner, agent=bench.agent, title="history") for _ in range(conversations_n)
            ])
            turns = []
            for c in conversations:
                for k in range(per_conversation):
                    if made + len(turns) >= count:
                        break
                    turns.append((c, k))
            messages = Message.objects.bulk_create(
                [Message(conversation=c, position=2 * k + 1, role="user", content=f"write {k} to h{k}.txt", author=bench.owner) for c, k in turns]
                + [Message(conversation=c, position=2 * k + 2, role="assistant", content="") for c, k in turns]
            )
            assistant = messages[len(turns):]
            calls = []
            for (c, k), m in zip(turns, assistant):
                arguments = {"path": f"h{k}.txt", "content": str(k)}
                calls.append(ToolCall(message=m, position=0, call_id=f"call_{k}_0", name="write_file", arguments=arguments,
                                      raw_arguments=json.dumps(arguments), arguments_hash=arguments_hash(arguments),
                                      status="succeeded", is_gated=True, result=f"Wrote 1 bytes to h{k}.txt.",
                                      finished_at=now))
            calls = ToolCall.objects.bulk_create(calls)
            approvals = []
            for i, ((c, k), call) in enumerate(zip(turns, calls)):
                requested = now - timedelta(seconds=(made + i) * 30 * 86400 / max(count, 1))
                approvals.append(Approval(
                    tool_call=call, conversation=c, requested_by=bench.owner, reason="write_file needs approval.",
                    risk="medium", arguments_hash=call.arguments_hash, status="approved", requested_at=requested,
                    decided_at=requested + timedelta(seconds=20), decided_by=bench.approver, decided_via="api",
                ))
            Approval.objects.bulk_create(approvals)
            made += len(turns)
    log(f"  inserted in {time.time() - t0:.1f} s")


# --- Profiling (optional) -------------------------------------------------------------------------


class Profiler:
    """py-spy (from the bench virtualenv) on the worker and its pool children, and on daphne."""

    def __init__(self, stack: Stack, name: str):
        self.stack, self.name = stack, name
        self.popens = []
        self.outputs = []

    def start(self) -> None:
        spy = ensure_bench_venv().parent / "py-spy"
        for target, pid in (("worker", self.stack.processes["worker"].popen.pid), ("daphne", self.stack.processes["web"].popen.pid)):
            output = self.stack.work / f"profile-{self.name}-{target}.txt"
            # --gil: only the thread holding the GIL is sampled, i.e. where the CPU goes (the 2 cores are the bound)
            args = [str(spy), "record", "--format", "raw", "--rate", "200", "--gil", "--nonblocking", "-o", str(output), "-p", str(pid)]
            if target == "worker":
                args.append("--subprocesses")
            self.popens.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.outputs.append((target, output))

    def stop(self) -> None:
        import signal

        for popen in self.popens:
            popen.send_signal(signal.SIGINT)
        for popen in self.popens:
            try:
                popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                popen.kill()

    def summary(self) -> dict:
        out = {}
        for target, path in self.outputs:
            out[target] = {"file": str(path), "top": summarize_profile(path, children_only=target == "worker"),
                           "categories": categorize_profile(path, children_only=target == "worker")}
        return out


PROFILE_CATEGORIES = {
    # (name, substrings of a stack that put a sample in it); the first that matches wins
    "worker": [
        ("push_now (the calls)", ("push_now (core/live.py",)),
        ("model call (litellm, with its logging thread)", ("complete (chat/llm.py", "litellm/")),
        ("event loops in other threads (asyncio, Redis clients; a worker's pushes count under push_now)",
         ("_worker (concurrent/futures/thread.py", "channels_redis", "asyncio/", "redis/asyncio")),
        ("templates", ("render_to_string", "django/template/")),
        ("Celery enqueue (kombu)", ("apply_async (celery/app/task.py", "kombu/")),
        ("database (ORM + sqlite3)", ("django/db/", "sqlite3")),
        ("Celery task handling", ("celery/", "billiard/")),
    ],
    "daphne": [
        ("Celery enqueue (kombu)", ("apply_async (celery/app/task.py", "kombu/")),
        ("pushes (push_now, channel layer)", ("push_now (core/live.py", "channels_redis")),
        ("templates", ("render_to_string", "django/template/")),
        ("database (ORM + sqlite3)", ("django/db/", "sqlite3")),
        ("Django + ninja request handling", ("SyncToAsync.thread_handler",)),
        ("event loop (twisted, asyncio: HTTP and websockets)", ("twisted/", "asyncio/", "daphne/")),
    ],
}


def _profile_lines(path: Path, children_only: bool):
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        if children_only and sum(1 for frame in stack.split(";")[:3] if frame.startswith("process ")) < 2:
            continue  # the worker's parent process (consuming from Redis), not a pool child
        yield stack, int(count)


def categorize_profile(path: Path, children_only: bool = False) -> list[tuple[str, float]]:
    if not path.exists():
        return []
    categories = PROFILE_CATEGORIES["worker" if children_only else "daphne"]
    counts: dict[str, int] = {}
    total = 0
    for stack, n in _profile_lines(path, children_only):
        total += n
        name = next((name for name, needles in categories if any(x in stack for x in needles)), "other Python")
        counts[name] = counts.get(name, 0) + n
    return sorted(((name, c / total) for name, c in counts.items()), key=lambda item: -item[1]) if total else []


def summarize_profile(path: Path, top: int = 25, children_only: bool = False) -> list[tuple[str, float]]:
    """Share of the samples in which each function is on the stack (inclusive), from py-spy's raw
    (collapsed) output; idle samples are left out by py-spy unless --idle."""
    if not path.exists():
        return []
    inclusive: dict[str, int] = {}
    total = 0
    for stack, n in _profile_lines(path, children_only):
        total += n
        for frame in set(stack.split(";")):
            inclusive[frame] = inclusive.get(frame, 0) + n
    ranked = sorted(inclusive.items(), key=lambda item: -item[1])[:top]
    return [(frame, count / total) for frame, count in ranked] if total else []


# --- The bench virtualenv -------------------------------------------------------------------------------


def ensure_bench_venv() -> Path:
    """.venv-bench with requirements-bench.txt (the peers, matplotlib, py-spy); made on first use."""
    python = BENCH_VENV / "bin" / "python"
    requirements = ROOT / "requirements-bench.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    marker = BENCH_VENV / ".bench-requirements"
    if python.exists() and marker.exists() and marker.read_text() == digest:
        return python
    log(f"making the bench virtualenv {BENCH_VENV} from requirements-bench.txt (once)")
    base = getattr(sys, "_base_executable", None) or "python3"
    subprocess.run([base, "-m", "venv", str(BENCH_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(requirements)], check=True)
    marker.write_text(digest)
    return python


# --- Machine and versions ------------------------------------------------------------------------------


def machine() -> dict:
    from importlib.metadata import version

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), "0")
    redis_version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()
    import sqlite3

    packages = {name: version(name) for name in ("Django", "celery", "channels", "channels-redis", "daphne", "redis", "litellm", "django-ninja")}
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(int(memory) / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "redis_server": next((w.split("=", 1)[1] for w in redis_version if w.startswith("v=")), "?"),
        "packages": packages,
    }


# --- The table ---------------------------------------------------------------------------------------------


def fmt(value: float, digits: int = 1) -> str:
    if value != value:  # nan
        return "—"
    return f"{value:.{digits}f}" if value < 1000 else f"{value:,.0f}"


def verdict(ok) -> str:
    return "n/a" if ok is None else "info" if ok == "info" else "met" if ok else "MISSED"


def report(results: dict) -> str:
    lines: list[str] = []
    add = lines.append
    m = results["machine"]
    mode = "smoke" if results["smoke"] else "full"
    add(f"hitl benchmarks ({mode} run, {results['started']}; {results['database']})")
    add(f"machine: {m['nproc']} cores, {m['cpu']}, {m['memory_gib']} GiB, Linux {m['kernel']}; Python {m['python']}, "
        f"SQLite {m['sqlite']}, redis-server {m['redis_server']}")
    add("versions: " + ", ".join(f"{k} {v}" for k, v in m["packages"].items()))
    add(f"load average (1, 5, 15 min): {results['load_start']} at the start, {results['load_end']} at the end")
    add("")
    if "floors" in results:
        f = results["floors"]
        loop = results["loop"]
        row = "  {:<58} {:>4} {:>9} {:>9}  {}"
        add("1. Floors (ms)")
        add(row.format("", "n", "p50", "p95", ""))
        for key, label in (
            ("commit", "SQLite commit, app settings (IMMEDIATE, WAL, 1 UPDATE)" if results["database"].startswith("SQLite")
             else "PostgreSQL commit, app settings (1 UPDATE)"),
            ("redis", "Redis round trip (PING)"),
            ("commit_redis", "commit + Redis round trip"),
            ("celery", "Celery round trip (send_task → app worker → RPUSH → BLPOP)"),
            ("commit_enqueue", "commit + Celery enqueue (send_task, not waited for)"),
            ("push", "Channels group_send → websocket frame (daphne)"),
            ("push_app", "  same, sent as the app does (core.live.push_now)"),
            ("one_hop", "one hop: commit + Redis + Celery + push, back to back"),
        ):
            add(row.format(label, f[key]["n"], fmt(f[key]["p50"], 2), fmt(f[key]["p95"], 2), ""))
        add("")
        push_floor, one_hop = f["push"]["p50"], f["one_hop"]["p50"]
        gate_ratio = loop["gate"]["p50"] / push_floor
        decision_ratio = loop["decision"]["p50"] / one_hop
        add("2.-3. Gate and decision latency (ms), our stack, fresh conversation per cycle, socket already open")
        add(row.format("", "n", "p50", "p95", "p50 ÷ floor"))
        add(row.format("gate: Approval.requested_at → card frame on the socket", loop["gate"]["n"], fmt(loop["gate"]["p50"]),
                       fmt(loop["gate"]["p95"]), f"{gate_ratio:.1f}× push floor"))
        add(row.format("  (message POST sent → card frame)", loop["message_to_card"]["n"], fmt(loop["message_to_card"]["p50"]),
                       fmt(loop["message_to_card"]["p95"]), ""))
        add(row.format("decision POST sent → 'succeeded' card frame", loop["decision_to_tool_done"]["n"],
                       fmt(loop["decision_to_tool_done"]["p50"]), fmt(loop["decision_to_tool_done"]["p95"]),
                       f"{loop['decision_to_tool_done']['p50'] / one_hop:.1f}× one hop"))
        add(row.format("decision POST sent → final answer frame", loop["decision"]["n"], fmt(loop["decision"]["p50"]),
                       fmt(loop["decision"]["p95"]), f"{decision_ratio:.1f}× one hop"))
        add(row.format("  (decision POST sent → its HTTP response)", loop["decision_http"]["n"], fmt(loop["decision_http"]["p50"]),
                       fmt(loop["decision_http"]["p95"]),
                       f"{loop['decision_http']['p50'] / f['commit_enqueue']['p50']:.1f}× commit + enqueue" if "commit_enqueue" in f else ""))
        add("")
        add("4. Whole cycle (ms): message → card → approve → final answer")
        ours = loop["cycle"]["p50"]
        add(row.format("", "n", "p50", "p95", "p50 ÷ ours"))
        add(row.format(f"hitl (HTTP + Celery + {results['database'].split()[0]} + Redis + websocket)", loop["cycle"]["n"], fmt(ours), fmt(loop["cycle"]["p95"]), "1.00"))
        peers = results.get("peers") or {}
        for key in ("langgraph", "pydantic-ai", "openai-agents"):
            if key in peers:
                p = peers[key]
                label = f"{p['peer']} {p['version']} ({p['state']}, in-process)"
                add(row.format(label, p["cycle"]["n"], fmt(p["cycle"]["p50"], 2), fmt(p["cycle"]["p95"], 2), f"{p['cycle']['p50'] / ours:.3f}"))
        if not peers:
            add("  (peers skipped)")
        add("")
    if results.get("scale"):
        add(f"5. Scale: N conversations waiting at once, then approve-all through the API (POST /api/approvals/decisions, {BULK_DECISIONS} ids a request)")
        srow = "  {:>7} {:>6} {:>13} {:>13} {:>13} {:>13} {:>12} {:>12}"
        add(srow.format("workers", "N", "N waiting, s", "approved, s", "finished, s", "decisions/s", "worker MiB", "daphne MiB"))
        for s in results.get("scale", []):
            add(srow.format(f"{s['workers'] or 'run†'}{' *' if s.get('profile') else ''}", s["conversations"], fmt(s["all_waiting_s"], 2), fmt(s["decisions_submitted_s"], 2),
                            fmt(s["all_finished_s"], 2), fmt(s["conversations"] / s["all_finished_s"], 0),
                            fmt(s["worker_memory"]["peak_mib"], 0), fmt(s["daphne_memory"]["peak_mib"], 0)))
        add("  (workers: prefork pool processes; N waiting: from the first message POST until all N wait; approved: the")
        add("   approve-all request answered; finished: from the approve-all request until all N are idle again; MiB: peak")
        add("   RSS (VmHWM) of the biggest process that runs tasks, and of daphne since it started; *: a run of its own with")
        add("   py-spy attached, slower for it)")
        for s in results.get("scale", []):
            if s.get("procfile"):
                p = s["procfile"]
                add(f"  †: the workers as `make run` starts them: {p['processes']} × the Procfile's line, {p['pool']} pool, concurrency {p['concurrency']} each")
        for s in results.get("scale", []):
            if s.get("profile"):
                add(f"  where the CPU goes in the {s['workers']}-worker approve-all (the * run; py-spy --gil, share of samples):")
                for target, profile in s["profile"].items():
                    add(f"    {target}: " + "; ".join(f"{name} {share * 100:.0f}%" for name, share in profile["categories"]))
        add("")
    if results.get("series"):
        add("   latency against conversations already waiting (ms, p50 / p95)")
        prow = "  {:>9} {:>4} {:>17} {:>17} {:>17} {:>12}"
        add(prow.format("waiting", "n", "gate", "decision", "cycle", "push floor"))
        for point in results.get("series", []):
            add(prow.format(point["waiting"], point["gate"]["n"],
                            f"{fmt(point['gate']['p50'])} / {fmt(point['gate']['p95'])}",
                            f"{fmt(point['decision']['p50'])} / {fmt(point['decision']['p95'])}",
                            f"{fmt(point['cycle']['p50'])} / {fmt(point['cycle']['p95'])}",
                            fmt(point["push_floor"]["p50"], 2)))
        add("")
    if results.get("pages"):
        add("6. Pages (ms, p50): in-process = Django test client in this process, queries counted with CaptureQueriesContext;")
        add("   via daphne = the same GET over HTTP (session cookie or bearer token), so it includes ASGI and the socket")
        grow = "  {:>8} {:<36} {:>11} {:>8} {:>8} {:>11} {:>9}"
        add(grow.format("approvals", "page", "in-process", "queries", "of it SQL", "via daphne", "KiB"))
        for measured in results.get("pages", []):
            for page in measured["pages"]:
                queries = str(page["queries"]) if page["queries"] == page["queries_min"] else f"{page['queries_min']}-{page['queries']}"
                add(grow.format(measured["rows"], page["page"], fmt(page["in_process"]["p50"]), queries,
                                fmt(page["sql_ms"]["p50"]), fmt(page["via_daphne"]["p50"]), fmt(page["bytes"] / 1024, 0)))
        add("")
    if results.get("concurrency"):
        lines.extend(concurrency_report(results["concurrency"]))
        add("")
    add("Targets")
    targets = results["targets"]
    for t in targets:
        add(f"  {verdict(t['ok']):<7} {t['what']}: {t['figure']}")
    return "\n".join(lines)


def evaluate(results: dict) -> None:
    targets = []
    if "floors" in results:
        f, loop = results["floors"], results["loop"]
        gate_ratio = loop["gate"]["p50"] / f["push"]["p50"]
        targets.append({"what": "gate latency ≤ 1.5× the Channels push floor (p50)", "ok": gate_ratio <= 1.5,
                        "figure": f"{gate_ratio:.1f}× ({fmt(loop['gate']['p50'])} ms vs {fmt(f['push']['p50'], 2)} ms)"})
        decision_ratio = loop["decision"]["p50"] / f["one_hop"]["p50"]
        targets.append({"what": "decision latency ≤ 1.5× the one-hop floor (p50)", "ok": decision_ratio <= 1.5,
                        "figure": f"{decision_ratio:.1f}× ({fmt(loop['decision']['p50'])} ms vs {fmt(f['one_hop']['p50'], 2)} ms)"})
        http_ratio = loop["decision_http"]["p50"] / f["commit_enqueue"]["p50"]
        targets.append({"what": "decision POST → its HTTP response ≤ 2× commit + enqueue (p50)", "ok": http_ratio <= 2,
                        "figure": f"{http_ratio:.1f}× ({fmt(loop['decision_http']['p50'])} ms vs {fmt(f['commit_enqueue']['p50'], 2)} ms)"})
    peers = results.get("peers") or {}
    if peers and "loop" in results:
        ours = results["loop"]["cycle"]["p50"]
        if "langgraph" in peers:
            lg = peers["langgraph"]["cycle"]["p50"]
            targets.append({"what": "whole cycle faster than LangGraph's durable cycle (p50)", "ok": ours < lg,
                            "figure": f"{fmt(ours)} ms vs {fmt(lg, 2)} ms ({ours / lg:.1f}× LangGraph)"})
        in_process = [(peers[k]["cycle"]["p50"], peers[k]["peer"]) for k in ("pydantic-ai", "openai-agents") if k in peers]
        if in_process:
            fastest, name = min(in_process)
            targets.append({"what": "whole cycle within 2× of the fastest in-process peer (p50)", "ok": ours <= 2 * fastest,
                            "figure": f"{fmt(ours)} ms vs {name} {fmt(fastest, 2)} ms ({ours / fastest:.1f}×)"})
    for s in results.get("scale", []):
        if s["workers"] is None:
            ok = s["all_finished_s"] < 5 if s["conversations"] >= 1000 else None
            note = "" if s["conversations"] >= 1000 else f" (only {s['conversations']} conversations in this run)"
            targets.append({"what": f"scripted approve-all of {s['conversations']} with the workers as `make run` starts them: < 5 s",
                            "ok": ok, "figure": f"{fmt(s['all_finished_s'], 2)} s{note}"})
        if s["workers"] == 2 and not s.get("profile"):
            ok = s["all_finished_s"] < 10 if s["conversations"] >= 1000 else None
            note = "" if s["conversations"] >= 1000 else f" (only {s['conversations']} conversations in this run)"
            targets.append({"what": f"{s['conversations']} waiting conversations resumed in < 10 s with 2 workers",
                            "ok": ok, "figure": f"{fmt(s['all_finished_s'], 2)} s{note}"})
    pages = results.get("pages", [])
    if pages:
        last, first = pages[-1], pages[0]
        for page, small in zip(last["pages"], first["pages"]):
            if page["page"].startswith("conversation list"):
                continue  # not one of the pages the target names; shown for information
            fast = page["in_process"]["p50"] < 50 and page["via_daphne"]["p50"] < 50
            flat = page["queries"] == small["queries"]
            targets.append({
                "what": f"{page['page']} < 50 ms at {last['rows']} approvals, query count flat",
                "ok": fast and flat,
                "figure": f"{fmt(page['in_process']['p50'])} ms in-process, {fmt(page['via_daphne']['p50'])} ms via daphne; "
                          f"{small['queries']} queries at {first['rows']} → {page['queries']} at {last['rows']}",
            })
    if results.get("concurrency"):
        targets.extend(concurrency_targets(results["concurrency"]))
    results["targets"] = targets


# --- Main -------------------------------------------------------------------------------------------------


def main() -> int:
    config = parse_args()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="hitl-bench-"))
    if config.concurrency:  # section 7's workers count each loop task's statements and pushes (bench/counts.py)
        os.environ["HITL_BENCH_COUNTS"] = str(work / "counts")
    database_url = os.environ.get("DATABASE_URL", "")
    stack = Stack(work=work, database_url=f"sqlite:///{work / 'db.sqlite3'}", debug=config.debug)
    if database_url and is_postgres(database_url):
        stack.database_url = create_postgres_database(stack, database_url)
    results = {
        "smoke": config.smoke,
        "started": datetime.now(dt_timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "database": ("PostgreSQL (fresh database)" if is_postgres(stack.database_url) else "SQLite file in a temp dir")
        + (", DEBUG=1" if config.debug else ", DEBUG=0"),
        "machine": machine(),
        "load_start": load(),
    }
    bench = Bench(config, stack)
    try:
        stack.start_redis()  # first: making the users pushes to their groups (a lost push would be logged)
        bench.setup_django()
        if config.concurrency_only:
            bench.start_processes(worker_processes=None)
            bench.concurrency()
        else:
            bench.start_processes()
            bench.latencies()
            bench.peers()
            bench.concurrency()
            bench.scale_tests()
            bench.series()
            bench.pages()
        stack.check()
    except BaseException:
        for name, process in stack.processes.items():
            print(f"--- {name} ---\n{process.tail()}", file=sys.stderr)
        raise
    finally:
        stack.stop()
        if not config.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"kept {work}")
    results.update(bench.results)
    results["load_end"] = load()
    results["seconds"] = time.time() - started
    evaluate(results)
    print(report(results))
    print(f"\n(run took {results['seconds']:.0f} s)")
    if config.json_path:
        config.json_path.write_text(json.dumps(results, indent=1, default=str))
    if config.plot and results.get("series"):
        plot(results, config.plot, work)
    if config.concurrency_plot and results.get("concurrency"):
        plot_concurrency(results, config.concurrency_plot)
    broken = failed_anything(results["concurrency"]) if results.get("concurrency") else []
    if broken:
        print("\nsome requests or conversations failed in section 7:\n  " + "\n  ".join(broken), file=sys.stderr)
        return 1
    return 0


def plot(results: dict, path: Path, work: Path) -> None:
    python = ensure_bench_venv()
    data = Path(tempfile.mkstemp(suffix=".json")[1])
    data.write_text(json.dumps({"series": results.get("series", []), "scale": results.get("scale", []),
                                "machine": results["machine"], "started": results["started"]}, default=str))
    subprocess.run([str(python), str(ROOT / "bench" / "plot.py"), str(data), str(path)], check=True)
    data.unlink()
    log(f"plot written to {path}")


def plot_concurrency(results: dict, path: Path) -> None:
    python = ensure_bench_venv()
    data = Path(tempfile.mkstemp(suffix=".json")[1])
    data.write_text(json.dumps({"concurrency": results["concurrency"], "machine": results["machine"],
                                "started": results["started"]}, default=str))
    subprocess.run([str(python), str(ROOT / "bench" / "plot_concurrency.py"), str(data), str(path)], check=True)
    data.unlink()
    log(f"plot written to {path}")


if __name__ == "__main__":
    sys.exit(main())
