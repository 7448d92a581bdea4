#!/usr/bin/env python
"""Fair sharing of waiting (issue 36 item 3), measured on the real stack: one user opens 300
simultaneous long polls (`GET /api/approvals/{id}?wait=60`, each on an approval of theirs that
nobody decides) while another user's plain reads of their own approval (`GET /api/approvals/{id}`)
are timed, beside the same reads without the flood.

    python bench/fair_waiting.py                  # SQLite (a fresh file), the default cap
    bin/with-postgres python bench/fair_waiting.py
    python bench/fair_waiting.py --uncapped       # a second round with the cap lifted, to compare

Past HITL_LONG_POLLS_PER_USER (20) the flood's polls are answered 429 at once: they are counted, and
so are those still waiting when the reads are done. It starts its own redis-server and daphne on
free loopback ports (bench/stack.py; no worker: nothing here runs a turn), with production settings
(DEBUG=0) and prints one table. A benchmark, never a test: it fails only when something does not
work (a read that is not 200)."""
import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
APP_VENV = ROOT / ".venv"

try:
    import django  # noqa: F401
    import httpx
except ImportError:  # any python: run again with the app's virtualenv, as bench/run.py does
    python = APP_VENV / "bin" / "python"
    if python.exists() and Path(sys.prefix).resolve() != APP_VENV.resolve():
        os.execv(str(python), [str(python), *sys.argv])
    raise SystemExit("Run with the app's virtualenv: .venv/bin/python bench/fair_waiting.py")

sys.path.insert(0, str(ROOT))

from bench.run import insert_waiting, p50, p95  # noqa: E402
from bench.stack import Stack, create_postgres_database, is_postgres, load, log, wait_until  # noqa: E402

WAIT_SECONDS = 60  # what each of the flood's polls asks for (HITL_API_MAX_WAIT_SECONDS, the most it gets)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--polls", type=int, default=300, help="the flooding user's simultaneous ?wait= polls (300)")
    parser.add_argument("--reads", type=int, default=50, help="the other user's timed reads, each way (50)")
    parser.add_argument("--uncapped", action="store_true", help="a second round with HITL_LONG_POLLS_PER_USER lifted past --polls")
    return parser.parse_args()


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


class Flood:
    """`count` long polls of one token at once, from an event loop in a thread of its own; each
    answer's status is counted as it comes. `stop()` drops those still waiting (their client goes)."""

    def __init__(self, base_url: str, token: str, approval_ids: list[int]):
        self.base_url, self.token, self.ids = base_url, token, approval_ids
        self.statuses: Counter = Counter()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.future = asyncio.run_coroutine_threadsafe(self._all(), self.loop)

    async def _all(self) -> None:
        limits = httpx.Limits(max_connections=len(self.ids) + 10, max_keepalive_connections=len(self.ids) + 10)
        async with httpx.AsyncClient(base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"},
                                     limits=limits, timeout=WAIT_SECONDS + 60) as client:
            await asyncio.gather(*(self._one(client, pk) for pk in self.ids))

    async def _one(self, client: httpx.AsyncClient, pk: int) -> None:
        try:
            response = await client.get(f"/api/approvals/{pk}", params={"wait": WAIT_SECONDS})
            self.statuses[response.status_code] += 1
        except httpx.HTTPError as exc:
            self.statuses[type(exc).__name__] += 1

    @property
    def answered(self) -> int:
        return sum(self.statuses.values())

    def stop(self) -> Counter:
        self.future.cancel()
        wait_until(lambda: self.future.done(), 30, "the flood to stop")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        return self.statuses


def timed_reads(client: httpx.Client, approval_id: int, count: int, *, threads: list | None = None, pid: int = 0) -> list[float]:
    """`count` reads one after another, in ms; daphne's thread count before each goes in `threads`."""
    times = []
    for _ in range(count):
        if threads is not None:
            threads.append(threads_of(pid))
        t0 = time.perf_counter()
        response = client.get(f"/api/approvals/{approval_id}")
        times.append((time.perf_counter() - t0) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"the other user's read answered {response.status_code}: {response.text[:300]}")
    return times


def one_round(stack: Stack, users: SimpleNamespace, args, cap: int) -> dict:
    """daphne started with HITL_LONG_POLLS_PER_USER=cap; the reads alone, then under the flood."""
    os.environ["HITL_LONG_POLLS_PER_USER"] = str(cap)  # the stack's processes inherit this process's environment
    stack.start_daphne()
    pid = stack.processes["web"].popen.pid
    base = f"{stack.base_url}/api/approvals/"
    with httpx.Client(base_url=stack.base_url, headers={"Authorization": f"Bearer {users.reader_token}"}, timeout=120) as reader:
        timed_reads(reader, users.reader_approval, 10)  # the first of everything opens connections
        threads_alone, threads_flooded = [], []
        alone = timed_reads(reader, users.reader_approval, args.reads, threads=threads_alone, pid=pid)
        log(f"cap {cap}: {args.polls} long polls of one user at once, {base}<id>?wait={WAIT_SECONDS}")
        flood = Flood(stack.base_url, users.flooder_token, users.flooder_approvals)
        t0 = time.monotonic()
        past_the_cap = max(args.polls - cap, 0)
        wait_until(lambda: flood.answered >= past_the_cap or flood.future.done(), 120, "the polls past the cap to be answered")
        answered_in = time.monotonic() - t0
        flooded = timed_reads(reader, users.reader_approval, args.reads, threads=threads_flooded, pid=pid)
        still_waiting = args.polls - flood.answered
        statuses = flood.stop()
    stack.processes.pop("web").stop()
    return {"cap": cap, "alone": alone, "flooded": flooded, "statuses": dict(statuses), "still_waiting": still_waiting,
            "answered_in": answered_in, "past_the_cap": past_the_cap,
            "threads": (max(threads_alone), max(threads_flooded))}


def report(rounds: list[dict], args, database: str, loads: tuple[str, str]) -> str:
    lines = [
        f"fair waiting (issue 36 item 3): {database}, DEBUG=0, one daphne; load average {loads[0]} at the start, {loads[1]} at the end",
        f"{args.polls} simultaneous GET /api/approvals/{{id}}?wait={WAIT_SECONDS} of one user; "
        f"{args.reads} GET /api/approvals/{{id}} of another user, one after another (ms)",
        "",
        f"  {'HITL_LONG_POLLS_PER_USER':<26}{'reads':<22}{'n':>4}{'p50':>10}{'p95':>10}{'p50 ×':>8}{'p95 ×':>8}",
    ]
    for each in rounds:
        alone, flooded = each["alone"], each["flooded"]
        lines.append(f"  {each['cap']:<26}{'without the flood':<22}{len(alone):>4}{p50(alone):>10.1f}{p95(alone):>10.1f}")
        lines.append(f"  {'':<26}{'during the flood':<22}{len(flooded):>4}{p50(flooded):>10.1f}{p95(flooded):>10.1f}"
                     f"{p50(flooded) / p50(alone):>8.2f}{p95(flooded) / p95(alone):>8.2f}")
        answered = ", ".join(f"{count} × {status}" for status, count in sorted(each["statuses"].items(), key=str))
        lines.append(f"  {'':<26}the flood: {each['past_the_cap']} answered {each['answered_in']:.1f} s after it started; "
                     f"when the reads were done: {answered or 'none answered'}, {each['still_waiting']} still waiting")
        lines.append(f"  {'':<26}daphne's threads, at most: {each['threads'][0]} without the flood, {each['threads'][1]} during it")
    return "\n".join(lines)


def main() -> int:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="hitl-fair-"))
    stack = Stack(work=work, database_url=f"sqlite:///{work / 'db.sqlite3'}")
    if is_postgres(os.environ.get("DATABASE_URL", "")):
        stack.database_url = create_postgres_database(stack, os.environ["DATABASE_URL"])
    database = "PostgreSQL (fresh database)" if is_postgres(stack.database_url) else "SQLite file in a temp dir"
    started_load = load()
    try:
        stack.start_redis()
        os.environ.update(stack.env())
        import django

        django.setup()
        from django.contrib.auth.models import User
        from django.core.management import call_command

        from approvals.models import Approval
        from chat.demo import ensure_demo_agent
        from chat.models import ApiToken

        call_command("migrate", verbosity=0)
        call_command("collectstatic", "--no-input", verbosity=0)  # DEBUG=0 serves the manifest
        agent = ensure_demo_agent()
        flooder, reader = User.objects.create_user("flooder"), User.objects.create_user("reader")
        insert_waiting(SimpleNamespace(owner=flooder, agent=agent), args.polls)
        insert_waiting(SimpleNamespace(owner=reader, agent=agent), 1)
        users = SimpleNamespace(
            flooder_token=ApiToken.issue(flooder), reader_token=ApiToken.issue(reader),
            flooder_approvals=list(Approval.objects.filter(requested_by=flooder).values_list("pk", flat=True)),
            reader_approval=Approval.objects.get(requested_by=reader).pk,
        )
        from django.conf import settings

        caps = [settings.HITL_LONG_POLLS_PER_USER] + ([args.polls + 100] if args.uncapped else [])
        rounds = [one_round(stack, users, args, cap) for cap in caps]
    except BaseException:
        for name, process in stack.processes.items():
            print(f"--- {name} ---\n{process.tail()}", file=sys.stderr)
        raise
    finally:
        stack.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    print(report(rounds, args, database, (started_load, load())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
