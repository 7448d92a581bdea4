"""Many people at once (issue 12): conversations started together, and resumed together, on a model
that takes seconds to answer, with the worker as the Procfile starts it; LangGraph doing the same
beside it (bench/langgraph_concurrency.py, in .venv-bench). `bench/run.py` runs it (section 7).

The model is bench/model_server.py in a process of its own (one per stack: ours, LangGraph's, and
a streaming one for the frame count), answering after `latency` seconds. Our conversations are
started through the JSON API by an asyncio client with at most CLIENT_IN_FLIGHT requests in
flight (httpx's pool slows down with thousands of queued requests; a hundred keeps the client
far from being the bottleneck), and their state is read from the database every 50 ms.

Each workload's CPU (issue 24) is read from /proc/<pid>/stat of each of our processes (daphne, each
worker with its pool children, beat, Redis) once the stack has settled before it and again once it
has settled after it (so what it left to do, its last pushes, is in), and divided by its
conversations; the workers' statements and pushes are counted per loop task and step
(bench/counts.py, on when HITL_BENCH_COUNTS names a directory, as bench/run.py sets it). LangGraph's
process measures its own CPU around each workload (os.times()).
"""
import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import httpx

from bench import counts
from bench.cpu import CpuMeter, per_unit_ms
from bench.stack import ROOT, Stack, free_port, load, log, port_open, procfile_worker_args, settled, wait_until

CLIENT_IN_FLIGHT = 100  # API requests in flight at once from the benchmark's client
BULK_DECISIONS = 1000  # ids in one POST /api/approvals/decisions, the route's limit
STREAM_PROBES = 3  # conversations of the streaming run whose sockets count frames
STREAM_FRAME = "beforeend:#stream-"  # what a streamed-text push carries (chat.fragments.stream_delta_html)
LOG_PATTERNS = {
    "database is locked": re.compile(r"database is locked", re.I),
    "tracebacks": re.compile(r"^Traceback", re.M),
    "errors": re.compile(r"\bERROR\b|\bCRITICAL\b"),
    "warnings": re.compile(r"\bWARNING\b"),
}


class ModelProcess:
    """bench/model_server.py run by its CLI in a process of its own, so its work does not share a
    GIL with the client or the stack it answers."""

    def __init__(self, work: Path, name: str, latency: float, tokens_per_second: float = 0.0):
        self.port = free_port()
        self.log = work / f"{name}.log"
        self.popen = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "model_server.py"), "--latency", str(latency),
             "--tokens-per-second", str(tokens_per_second), "--port", str(self.port)],
            stdout=self.log.open("a"), stderr=subprocess.STDOUT,
        )
        wait_until(lambda: port_open(self.port) or self.popen.poll() is not None, 20, f"model server {name}")
        if self.popen.poll() is not None:
            raise RuntimeError(f"model server {name} died:\n{self.log.read_text()[-2000:]}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self, reset: bool = False) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/stats", method="POST" if reset else "GET",
                                         data=b"" if reset else None)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


class Concurrency:
    """The workloads on our stack. `bench` is bench/run.py's Bench (users, tokens, sockets, stack)."""

    def __init__(self, bench, *, starts: list[int], resume: int, stream: int, latency: float,
                 tokens_per_second: float, peer_python: Path | None):
        self.bench, self.stack = bench, bench.stack
        self.starts, self.resume_n, self.stream_n = starts, resume, stream
        self.latency, self.tokens_per_second = latency, tokens_per_second
        self.peer_python = peer_python
        self.log_offsets: dict[str, int] = {}

    # -- the whole section --

    def run(self) -> dict:
        from chat.demo import DEMO_TOOLS
        from chat.models import Agent

        stack: Stack = self.stack
        log(f"many at once: model servers (latency {self.latency:g} s), the worker as the Procfile starts it (load {load()})")
        self.model = ModelProcess(stack.work, "model-server", self.latency)
        self.streaming = ModelProcess(stack.work, "model-server-streaming", self.latency, self.tokens_per_second)
        for name in ("worker", "worker2", "web"):  # the logs are appended to across restarts: this section's part
            path = stack.work / f"{name}.log"
            self.log_offsets["start-" + name] = path.stat().st_size if path.exists() else 0
        try:
            for slug, server in (("bench-model", self.model), ("bench-streaming", self.streaming)):
                Agent.objects.update_or_create(slug=slug, defaults={
                    "name": slug, "model": "openai/gpt-4o-mini", "api_base": server.base_url, "tools": DEMO_TOOLS,
                    "require_approval": ["write_file", "delete_file", "send_email"], "open_to_everyone": True,
                })
            worker = stack.processes.get("worker")
            if worker is None or not worker.from_procfile:
                stack.stop_worker()
                worker = stack.start_worker()  # no flags: the Procfile's line, so Django settings pick the pool
            started_s = worker.ready_s
            log(f"  worker ready in {started_s:.1f} s: {worker.pool} pool, concurrency {worker.concurrency}")
            self.bench.celery_ping()
            alone = self.alone()
            results = {
                "latency_s": self.latency,
                "alone": alone,
                "client_in_flight": CLIENT_IN_FLIGHT,
                "worker": {"command": "celery " + " ".join(procfile_worker_args()).replace("bench.worker_app", "hitl"),
                           "pool": worker.pool, "concurrency": worker.concurrency, "ready_s": started_s,
                           "processes": len(stack.workers)},
                "starts": [self.start(n, "bench-model") for n in self.starts],
            }
            results["stream"] = self.start(self.stream_n, "bench-streaming", probes=STREAM_PROBES)
            results["stream"]["tokens_per_second"] = self.tokens_per_second
            results["resume"] = self.resume(self.resume_n)
            results["logs"] = self.log_findings(since_start=True)
            self.stack.check()
        finally:
            self.model.stop()
            self.streaming.stop()
        if self.peer_python:
            results["langgraph"] = self.langgraph()
        return results

    def alone(self, rounds: int = 4) -> dict:
        """Conversations one at a time on the otherwise idle stack, before anything else: the first
        warms up (the worker's first model call opens litellm's HTTP client for that api_base, and
        imports litellm if the worker did not at start); the others are the floor for the figures
        below: what one POST costs, and how long one conversation takes to be answered (the model's
        latency plus our overhead)."""
        from chat.models import Conversation

        post_ms, answered_s = [], []
        for i in range(rounds):
            posted, failed = self.post_all([("conversations", {"agent": "bench-model", "message": f"hello alone {i}"})], 201)
            if failed:
                raise RuntimeError(f"one conversation alone: {failed[0]}")
            conversation = Conversation.objects.filter(pk=posted[0]["id"])
            wait_until(lambda: conversation.filter(status__in=[Conversation.Status.IDLE, Conversation.Status.FAILED]).exists(),
                       120, "one conversation alone", interval=0.02)
            if conversation.filter(status=Conversation.Status.FAILED).exists():
                raise RuntimeError(f"one conversation alone failed: {conversation.get().error}")
            if i:
                post_ms.append((posted[0]["answered_at"] - posted[0]["sent_at"]) * 1000)
                answered_s.append(time.time() - posted[0]["sent_at"])
        self.mark_logs()
        result = {"post_ms": summary(post_ms), "answered_s": summary(answered_s)}
        log(f"  one conversation alone: POST {result['post_ms']['p50']:.0f} ms, answered after {result['answered_s']['p50']:.2f} s")
        return result

    # -- concurrent start --

    def start(self, n: int, agent: str, probes: int = 0) -> dict:
        """N conversations started at once; seconds from the first POST until every one is idle with
        its answer. With `probes`, that many conversations' sockets are opened as soon as their POST
        returns, and their streamed-text frames counted. A POST or a conversation that fails is
        counted (and makes the run fail at the end), and the rest is still measured."""
        from chat.models import Conversation, Message

        self.settle()
        log(f"  start: {n} conversations at once, agent {agent} (load {load()})")
        tag = uuid.uuid4().hex[:6]
        model = self.streaming if agent == "bench-streaming" else self.model
        model.stats(reset=True)
        self.stack.reset_peak_memory()
        sockets, socket_errors = [], []
        meter = self.measure()

        async def open_probe(index: int, body: dict) -> None:
            if index < probes:
                try:
                    sockets.append(await asyncio.to_thread(self.bench.open_socket, body["id"]))
                except Exception as exc:  # daphne drops a handshake it cannot finish in time: counted
                    socket_errors.append(f"{exc.__class__.__name__}: {exc}")

        t0 = time.time()
        posted, failed_posts = self.post_all(
            [("conversations", {"agent": agent, "message": f"hello {tag} {i}"}) for i in range(n)], 201, on_response=open_probe)
        t_posted = time.time()
        ids = [r["id"] for r in posted]
        of_round = Conversation.objects.filter(pk__in=ids)
        answered = of_round.filter(status=Conversation.Status.IDLE, messages__role=Message.Role.ASSISTANT).values("pk").distinct()
        failed = of_round.filter(status=Conversation.Status.FAILED)
        unfinished = wait_settled(lambda: len(ids) - answered.count() - failed.count(), 120 + n * 0.5)
        t_done = time.time()
        stats = model.stats()
        cost = self.measured(meter, n)
        answered_at = sorted(
            m.created_at.timestamp() - t0
            for m in Message.objects.filter(conversation__in=ids, role=Message.Role.ASSISTANT)
        ) or [float("nan")]
        result = {
            "conversations": n,
            "agent": agent,
            "posted_s": t_posted - t0,
            "post_ms": summary([(r["answered_at"] - r["sent_at"]) * 1000 for r in posted]),
            "all_answered_s": t_done - t0,
            "first_answer_s": answered_at[0],
            "median_answer_s": answered_at[len(answered_at) // 2],
            "p95_answer_s": answered_at[int(len(answered_at) * 0.95) - 1 if len(answered_at) > 1 else 0],
            "last_answer_s": answered_at[-1],
            "model_requests": stats["requests"],
            "model_peak_in_flight": stats["peak_in_flight"],
            "worker_memory": self.stack.worker_memory(),
            "daphne_memory": self.stack.daphne_memory(),
            "failures": failures(failed_posts, failed, unfinished),
            "logs": self.log_findings(),
            **cost,
        }
        if probes:
            time.sleep(0.5)  # the last frames of the final push are on their way
            result["frames"] = [frame_rates(socket) for socket in sockets]
            result["socket_errors"] = socket_errors
            for socket in sockets:
                socket.close()
        log(f"    all {n} POSTs answered after {result['posted_s']:.1f} s, all answered after {result['all_answered_s']:.1f} s; "
            f"model peak in flight {stats['peak_in_flight']}{describe(result['failures'])}; {describe_cost(cost)}")
        return result

    # -- concurrent resume --

    def resume(self, n: int) -> dict:
        """N conversations waiting for approval (their first turn a concurrent start itself, timed
        apart), then approve-all in one request per BULK_DECISIONS ids; seconds from the first bulk
        POST until every conversation has run its tool and had its one more model call."""
        from approvals.models import Approval
        from chat.models import Conversation, Message

        self.settle()
        log(f"  resume: {n} conversations to wait for approval (load {load()})")
        tag = uuid.uuid4().hex[:6]
        prefix = f"write hi to {tag}a"
        self.model.stats(reset=True)
        meter = self.measure()
        t0 = time.time()
        posted, failed_posts = self.post_all(
            [("conversations", {"agent": "bench-model", "message": f"{prefix}{i}.txt"}) for i in range(n)], 201)
        t_posted = time.time()
        of_round = Conversation.objects.filter(pk__in=[r["id"] for r in posted])
        waiting = of_round.filter(status=Conversation.Status.WAITING_FOR_APPROVAL)
        failed = of_round.filter(status=Conversation.Status.FAILED)
        unfinished = wait_settled(lambda: len(posted) - waiting.count() - failed.count(), 120 + n * 0.5)
        t_waiting = time.time()
        waiting_stats = self.model.stats()
        waiting_cost = self.measured(meter, len(posted))
        failed_first = failures(failed_posts, failed, unfinished)
        approval_ids = list(Approval.objects.filter(conversation__in=waiting, status=Approval.Status.PENDING)
                            .values_list("pk", flat=True))
        log(f"    {len(approval_ids)} waiting after {t_waiting - t0:.1f} s{describe(failed_first)}; {describe_cost(waiting_cost)}; "
            "approving all")

        self.model.stats(reset=True)
        self.stack.reset_peak_memory()
        meter = self.measure()  # settled: measured() waited for the stack to settle
        with httpx.Client(base_url=f"{self.stack.base_url}/api/", headers={"Authorization": f"Bearer {self.bench.owner_token}"},
                          timeout=120) as client:
            t1 = time.time()
            for start in range(0, len(approval_ids), BULK_DECISIONS):
                chunk = approval_ids[start:start + BULK_DECISIONS]
                response = client.post("approvals/decisions", json={"ids": chunk, "decision": "approve"})
                if response.status_code != 200 or len(response.json()["decided"]) != len(chunk):
                    raise RuntimeError(f"approve-all: {response.status_code} {response.text[:300]}")
            t_submitted = time.time()
        resumed = of_round.filter(approvals__pk__in=approval_ids).distinct()
        finals = Message.objects.filter(conversation__in=resumed, role=Message.Role.ASSISTANT, content__startswith="Done:")
        done = resumed.filter(status=Conversation.Status.IDLE, messages__in=finals).distinct()
        failed_resume = resumed.filter(status=Conversation.Status.FAILED)
        unfinished = wait_settled(lambda: len(approval_ids) - done.count() - failed_resume.count(), 120 + n * 0.5)
        t_done = time.time()
        stats = self.model.stats()
        cost = self.measured(meter, len(approval_ids))
        finished_at = sorted(m.created_at.timestamp() - t1 for m in finals) or [float("nan")]
        for conversation_id, title in done.values_list("pk", "title"):  # each resume really ran its tool
            assert (self.stack.work / "sandboxes" / str(conversation_id) / title.rsplit(" ", 1)[-1]).read_text() == "hi"
        result = {
            "conversations": n,
            "posted_s": t_posted - t0,
            "all_waiting_s": t_waiting - t0,
            "waiting_model_peak_in_flight": waiting_stats["peak_in_flight"],
            "waiting_failures": failed_first,
            "approved": len(approval_ids),
            "decisions_submitted_s": t_submitted - t1,
            "all_finished_s": t_done - t1,
            "first_finished_s": finished_at[0],
            "median_finished_s": finished_at[len(finished_at) // 2],
            "p95_finished_s": finished_at[int(len(finished_at) * 0.95) - 1 if len(finished_at) > 1 else 0],
            "model_requests": stats["requests"],
            "model_peak_in_flight": stats["peak_in_flight"],
            "worker_memory": self.stack.worker_memory(),
            "daphne_memory": self.stack.daphne_memory(),
            "failures": failures([], failed_resume, unfinished),
            "logs": self.log_findings(),
            "waiting_cost": waiting_cost,
            **cost,
        }
        log(f"    approve-all answered after {result['decisions_submitted_s']:.1f} s, all finished after "
            f"{result['all_finished_s']:.1f} s; model peak in flight {stats['peak_in_flight']}{describe(result['failures'])}; "
            f"{describe_cost(cost)}")
        return result

    # -- LangGraph, the same workloads --

    def langgraph(self) -> dict:
        log(f"  LangGraph: the same workloads, its own model server (load {load()})")
        model = ModelProcess(self.stack.work, "model-server-langgraph", self.latency)
        scratch = self.stack.work / "langgraph-concurrency"
        try:
            output = subprocess.run(
                [str(self.peer_python), str(ROOT / "bench" / "langgraph_concurrency.py"), "--base-url", model.base_url,
                 "--starts", ",".join(map(str, self.starts)), "--resume", str(self.resume_n), "--dir", str(scratch)],
                capture_output=True, text=True, timeout=1800, env=os.environ | {"OPENAI_API_KEY": "test"},
            )
        finally:
            model.stop()
        if output.returncode != 0:
            raise RuntimeError(f"the LangGraph concurrency peer failed:\n{output.stderr[-3000:]}")
        result = json.loads(output.stdout)
        for each in result["starts"]:
            log(f"    LangGraph {each['conversations']}: all answered after {each['all_answered_s']:.1f} s; "
                f"CPU {each['cpu_ms_per_conversation']:.1f} ms a conversation")
        log(f"    LangGraph resume {result['resume']['conversations']}: all finished after {result['resume']['all_finished_s']:.1f} s; "
            f"CPU {result['resume']['cpu_ms_per_conversation']:.1f} ms a conversation")
        return result

    # -- helpers --

    def post_all(self, requests: list[tuple[str, dict]], expected: int, on_response=None) -> tuple[list[dict], list[str]]:
        """POST every request, at most CLIENT_IN_FLIGHT at once (asyncio + httpx, one connection
        each). Returns the JSON of each response that had the expected status, with `sent_at` and
        `answered_at` (time.time()), and a line for each that did not."""
        base_url, token = f"{self.stack.base_url}/api/", self.bench.owner_token
        failed: list[str] = []

        async def main() -> list[dict]:
            results: list[dict | None] = [None] * len(requests)
            pending = iter(enumerate(requests))
            limits = httpx.Limits(max_connections=CLIENT_IN_FLIGHT, max_keepalive_connections=CLIENT_IN_FLIGHT)
            async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=120,
                                         limits=limits) as client:
                async def sender() -> None:
                    for index, (path, body) in pending:  # one shared iterator: each request is sent once
                        sent_at = time.time()
                        try:
                            response = await client.post(path, json=body)
                        except httpx.HTTPError as exc:
                            failed.append(f"POST {path}: {exc!r}")
                            continue
                        if response.status_code != expected:
                            failed.append(f"POST {path}: {response.status_code} {' '.join(response.text.split())[:200]}")
                            continue
                        results[index] = response.json() | {"sent_at": sent_at, "answered_at": time.time()}
                        if on_response:
                            await on_response(index, results[index])

                await asyncio.gather(*[sender() for _ in range(min(CLIENT_IN_FLIGHT, len(requests)))])
            return [r for r in results if r is not None]

        return asyncio.run(main()), failed

    def cpu_pids(self) -> dict[str, int]:
        """Our processes whose CPU a workload is charged: daphne, each worker (its pool children with
        it), beat and Redis; not the model servers (a stand-in for the provider) nor this client."""
        processes = self.stack.processes
        order = ["web", *sorted(name for name in processes if name.startswith("worker")), "beat", "redis"]
        return {("daphne" if name == "web" else name): processes[name].popen.pid for name in order if name in processes}

    def measure(self) -> dict:
        """Before a workload, the stack settled: each process's CPU and the counts so far."""
        return {"cpu": CpuMeter(self.cpu_pids()).start(), "counts": self.read_counts()}

    def measured(self, before: dict, conversations: int) -> dict:
        """After it: once the stack has settled again, what each process used, per conversation, and
        the statements and pushes the workers' loop tasks made, per step and per conversation."""
        self.settle()
        cpu = per_unit_ms(before["cpu"].stop(), conversations)
        cost = {"cpu": cpu}
        if before["counts"] is not None:
            done = counts.difference(before["counts"], self.read_counts())
            done["statements_per_conversation"] = done["statements"] / max(conversations, 1)
            done["pushes_per_conversation"] = done["pushes"] / max(conversations, 1)
            done["steps_per_conversation"] = done["steps"] / max(conversations, 1)
            cost["counts"] = done
        return cost

    def read_counts(self) -> dict | None:
        directory = os.environ.get("HITL_BENCH_COUNTS")
        return counts.read(directory) if directory else None

    def logged(self) -> list:
        """The processes whose logs and CPU this section watches: the workers and daphne."""
        return [*self.stack.workers, self.stack.processes["web"]]

    def settle(self) -> None:
        """Let the worker and daphne finish what the last workload left (pushes, the sweep) first."""
        pids = [process.popen.pid for process in self.logged()]
        try:
            wait_until(lambda: settled(pids, quiet=0.5), 30, "the stack to settle", interval=0)
        except AssertionError:
            log("    (the stack did not settle within 30 s; measuring anyway)")

    def mark_logs(self) -> None:
        for process in self.logged():
            self.log_offsets[process.name] = process.log.stat().st_size

    def log_findings(self, since_start: bool = False) -> dict:
        """What the worker and daphne logged since the last look (or since the section's start):
        counts of locked databases, tracebacks, errors and warnings, and a few of those lines."""
        findings = {}
        for process in self.logged():
            name, path = process.name, process.log
            start = self.log_offsets.get("start-" + name, 0) if since_start else self.log_offsets.get(name, 0)
            text = path.read_text(errors="replace")[start:]
            if not since_start:
                self.log_offsets[name] = path.stat().st_size
            counts = {key: len(pattern.findall(text)) for key, pattern in LOG_PATTERNS.items()}
            samples = []
            for line in text.splitlines():
                if any(LOG_PATTERNS[k].search(line) for k in ("database is locked", "errors", "warnings")) and line not in samples:
                    samples.append(line[:300])
                if len(samples) >= 5:
                    break
            findings[name] = {"counts": counts, "samples": samples}
        return findings


def frame_rates(socket) -> dict:
    """Streamed-text frames one conversation's socket received: how many, over how long, how many
    a second while the answer streamed, and the closest two came together."""
    frames = []
    while not socket.frames.empty():
        at, text = socket.frames.get_nowait()
        if isinstance(text, str):
            frames.append((at, STREAM_FRAME in text))
    stream = [at for at, is_stream in frames if is_stream]
    span = stream[-1] - stream[0] if len(stream) > 1 else 0.0
    gaps = [b - a for a, b in zip(stream, stream[1:])]
    busiest = max((sum(1 for t in stream if s <= t < s + 1) for s in stream), default=0)
    return {
        "frames": len(frames),
        "stream_frames": len(stream),
        "stream_span_s": span,
        "per_second": (len(stream) - 1) / span if span else float("nan"),
        "busiest_second": busiest,
        "min_gap_ms": min(gaps) * 1000 if gaps else float("nan"),
    }


def describe_cost(cost: dict) -> str:
    """One progress line's worth: CPU ms per conversation, summed and per process; counts per step."""
    cpu = cost["cpu"]
    text = f"CPU {cpu['sum_ms']:.1f} ms a conversation (" + ", ".join(
        f"{name} {ms:.1f}" for name, ms in cpu["per_process_ms"].items()) + ")"
    if cost.get("counts"):
        c = cost["counts"]
        text += f"; {c['statements_per_step']:.1f} statements and {c['pushes_per_step']:.1f} pushes a step"
    return text


def summary(values: list[float]) -> dict:
    values = sorted(values)
    if not values:
        return {"n": 0, "p50": float("nan"), "p95": float("nan")}
    return {"n": len(values), "p50": values[len(values) // 2], "p95": values[min(len(values) - 1, int(len(values) * 0.95))]}


def wait_settled(remaining, timeout: float) -> int:
    """Wait until `remaining()` (conversations not yet where they should be) is 0; give up after
    `timeout` seconds and return how many were left (a stalled step waits for the recovery sweep,
    minutes later: counted, not waited for)."""
    deadline = time.monotonic() + timeout
    while (left := remaining()) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    return max(left, 0)


def failures(failed_posts: list[str], failed_conversations, unfinished: int = 0) -> dict:
    """What did not work in a run: POSTs answered otherwise than expected, conversations that
    failed, conversations that had not finished when the wait gave up."""
    errors = list(failed_conversations.values_list("error", flat=True)[:3])
    return {"posts": len(failed_posts), "post_samples": failed_posts[:3],
            "conversations": failed_conversations.count(), "conversation_samples": errors, "unfinished": unfinished}


def _one_line(text: str) -> str:
    return " ".join(re.sub(r"<[^>]*>", " ", text).split())[:120]


def describe(failed: dict) -> str:
    parts = []
    if failed["posts"]:
        parts.append(f"{failed['posts']} POSTs failed ({_one_line(failed['post_samples'][0])})")
    if failed["conversations"]:
        parts.append(f"{failed['conversations']} conversations failed ({_one_line(failed['conversation_samples'][0])})")
    if failed.get("unfinished"):
        parts.append(f"{failed['unfinished']} conversations never finished (timed out)")
    return "; FAILED: " + ", ".join(parts) if parts else ""


def failed_anything(results: dict) -> list[str]:
    """Lines saying what did not work in section 7 (empty when everything did)."""
    lines = []
    for name, each in [*((f"start {e['conversations']}", e) for e in results["starts"]), ("streaming", results["stream"]),
                       ("resume (first turn)", {"failures": results["resume"]["waiting_failures"]}), ("resume", results["resume"])]:
        text = describe(each["failures"])
        if text:
            lines.append(f"{name}{text}")
    return lines
