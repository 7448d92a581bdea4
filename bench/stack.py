"""The real stack for the benchmarks, started as tests/e2e/conftest.py starts it: its own redis-server
on a free port, a Celery worker (prefork processes, or as the Procfile starts it), Celery beat and
daphne on a free port, all on loopback,
sharing one fresh SQLite file in a temporary directory (or a fresh PostgreSQL database when
DATABASE_URL is given), with the app's own settings (hitl.settings) and the scripted model."""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def log(message: str) -> None:
    """A timestamped progress line on stderr (the table goes to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load() -> str:
    """The load average (1, 5, 15 min), to print beside what was measured."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_until(predicate, timeout: float = 10.0, message: str = "condition", interval: float = 0.02):
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds.
    (The tests use it too: a condition waited for, never a sleep that hopes.)"""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {message}")
        time.sleep(interval)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path
    pool: str = ""  # a worker's pool, as its banner says ("prefork", "thread", ...)
    concurrency: int = 0
    from_procfile: bool = False  # a worker started by the Procfile's line, flags and all
    ready_s: float = 0.0  # from its start until it was ready and warm

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 20) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def settled(pids: list[int], quiet: float = 1.0) -> bool:
    """True when none of `pids` used more than a tick of CPU over `quiet` seconds."""
    before = [cpu_ticks(pid) for pid in pids]
    time.sleep(quiet)
    return all(cpu_ticks(pid) - b <= 1 for pid, b in zip(pids, before))


def reset_peak_memory(pid: int) -> None:
    """Start VmHWM afresh at the current RSS (Linux: 5 to /proc/<pid>/clear_refs), so a peak read
    later is the peak of what ran in between. Best effort: without the right, the peak stays the
    process's lifetime peak."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def procfile_worker_args(procfile: Path = ROOT / "Procfile", port: str = "") -> list[str]:
    """The arguments after `celery` on the Procfile's worker line, with the app swapped for the
    bench's (the same Celery app plus bench.ping): what `make run` and a deployment start. `port`
    stands for the `$PORT` honcho hands each copy of the line."""
    args = ["-A", "hitl", "worker", "--loglevel", "INFO"]
    if procfile.exists():
        for line in procfile.read_text().splitlines():
            name, _, command = line.partition(":")
            if name.strip() == "worker" and "celery" in command:
                words = shlex.split(os.path.expandvars(command.replace("$PORT", port) if port else command))
                args = words[next(i for i, w in enumerate(words) if Path(w).name == "celery") + 1:]
                break
    for i, word in enumerate(args):
        if word in ("-A", "--app") and i + 1 < len(args):
            args[i + 1] = "bench.worker_app"
        elif word.startswith("--app="):
            args[i] = "--app=bench.worker_app"
    return args


def procfile_worker_count(makefile: Path = ROOT / "Makefile") -> int:
    """How many worker processes `make run` starts from the Procfile's line (`HITL_WORKERS`, which
    the environment overrides as it does for make)."""
    if os.environ.get("HITL_WORKERS"):
        return int(os.environ["HITL_WORKERS"])
    found = re.search(r"^HITL_WORKERS\s*\?=\s*(\d+)", makefile.read_text(), re.M) if makefile.exists() else None
    return int(found[1]) if found else 1


def memory_kib(pid: int) -> dict:
    """VmRSS (now) and VmHWM (the peak resident set since the process started), in KiB."""
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    except OSError:
        pass
    return values


@dataclass
class Stack:
    work: Path
    database_url: str
    redis_port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    processes: dict = field(default_factory=dict)
    worker_generation: int = 0
    created_database: str = ""
    debug: bool = False

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.web_port}"

    def env(self) -> dict:
        """What every process of the stack (and this one, before Django starts) gets."""
        return {
            "DJANGO_SETTINGS_MODULE": "hitl.settings",
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "HITL_VAR_DIR": str(self.work / "var"),
            "HITL_SANDBOX_ROOT": str(self.work / "sandboxes"),
            # Production settings by default (DEBUG=0, static files from the collected manifest), with
            # plain HTTP on loopback; --debug runs as tests/e2e/conftest.py and `make run` do.
            "DEBUG": "1" if self.debug else "0",
            "SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789abcdef",
            "HITL_SSL_REDIRECT": "0",
            "HITL_SECURE_COOKIES": "0",
            "HITL_HSTS_SECONDS": "0",
            "PYTHONUNBUFFERED": "1",
            # Quotas off: these runs start conversations far faster than a person does.
            "HITL_QUOTA_CONVERSATIONS_PER_HOUR": "0",
            "HITL_QUOTA_MESSAGES_PER_MINUTE": "0",
            "HITL_QUOTA_MODEL_CALLS_PER_HOUR": "0",
            "HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR": "0",
            "HITL_LOG_LEVEL": "WARNING",  # a log line per conversation would be most of a worker's output
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # litellm's OpenAI provider insists on a key even for the local model server (bench/model_server.py).
            "OPENAI_API_KEY": "test",
        }

    def _start(self, name: str, args: list[str], extra_env: dict | None = None) -> Process:
        log = self.work / f"{name}.log"
        handle = log.open("a")
        env = os.environ | self.env() | (extra_env or {})
        popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
        self.processes[name] = Process(name, popen, log)
        return self.processes[name]

    def start_redis(self) -> None:
        if not shutil.which("redis-server"):
            raise SystemExit("redis-server is not installed: run bin/ensure-system-packages")
        self._start("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(self.work)])
        wait_until(lambda: port_open(self.redis_port), 10, "redis-server")

    @property
    def workers(self) -> list[Process]:
        """The worker processes: one, or as many as `make run` starts from the Procfile."""
        return [p for name, p in self.processes.items() if name.startswith("worker")]

    def start_worker(self, concurrency: int | None = None) -> Process:
        """The app's worker with one bench-only task added (bench/worker_app.py: the app's Celery app
        plus `bench.ping`). With `concurrency`, a prefork pool of that many processes, as the scale
        test has always measured; without, exactly as `make run` starts the Procfile's worker line,
        `HITL_WORKERS` processes of it (so Django settings choose the pool and its size: the default
        a deployment gets). Returns the first."""
        self.worker_generation += 1
        if concurrency is not None:
            # The pool is a setting (hitl/settings.py), which wins over a `--pool` flag: set it.
            args = ["-A", "bench.worker_app", "worker", "--loglevel", "INFO", "--without-mingle", "--without-gossip",
                    "--hostname", f"bench{self.worker_generation}@%h"]
            pool = {"HITL_WORKER_POOL": "prefork", "HITL_WORKER_CONCURRENCY": str(concurrency)}
            return self._start_worker("worker", args, concurrency, pool)
        started = []
        for n in range(1, procfile_worker_count() + 1):
            # honcho hands each copy its own $PORT, which the Procfile puts in the node's name.
            args = procfile_worker_args(port=str(5000 + n))
            started.append(self._start_worker("worker" if n == 1 else f"worker{n}", args, None))
        return started[0]

    def _start_worker(self, name: str, args: list[str], concurrency: int | None, env: dict | None = None) -> Process:
        t0 = time.monotonic()
        log = self.work / f"{name}.log"
        skip = log.stat().st_size if log.exists() else 0  # the log is appended to across restarts
        process = self._start(name, [str(BIN / "celery"), *args], env)
        output = lambda: process.log.read_text(errors="replace")[skip:]  # noqa: E731
        wait_until(lambda: "ready." in output() or not process.alive(), 90, "celery worker")
        if not process.alive():
            raise RuntimeError(f"the worker died:\n{process.tail()}")
        # The banner says which pool the settings (or flags) chose: ".> concurrency: 100 (thread)".
        banner = re.search(r"concurrency:\s*(\d+)\s*\((\w+)\)", output())
        process.pool = banner[2] if banner else "?"
        if env and env.get("HITL_WORKER_POOL") == "prefork" and process.pool != "prefork":
            raise RuntimeError(f"asked for a prefork worker, got a {process.pool} pool:\n{process.tail()}")
        process.concurrency = int(banner[1]) if banner else concurrency or 0
        process.from_procfile = concurrency is None
        if process.pool == "prefork":
            wait_until(lambda: len(children(process.popen.pid)) >= process.concurrency, 30, "pool children")
            # Each pool child imports litellm and makes one scripted call when it starts
            # (chat.tasks.warm_up_litellm), which takes seconds; it is warm once its CPU time stops moving.
            wait_until(lambda: settled(children(process.popen.pid)), 120, "pool children to warm up", interval=0.01)
        else:
            # A threads (or solo, eventlet...) pool has no children and worker_process_init may not
            # fire: whatever warm-up the worker does, it is done once its CPU time stops moving.
            wait_until(lambda: settled([process.popen.pid]), 120, "the worker to warm up", interval=0.01)
        process.ready_s = time.monotonic() - t0
        return process

    def stop_worker(self) -> None:
        for worker in self.workers:
            self.processes.pop(worker.name).stop(timeout=60)

    def start_beat(self) -> None:
        self._start("beat", [str(BIN / "celery"), "-A", "hitl", "beat", "--loglevel", "WARNING",
                             "--schedule", str(self.work / "beat-schedule")])

    def start_daphne(self) -> None:
        process = self._start("web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(self.web_port),
                                      "hitl.asgi:application"])
        wait_until(lambda: port_open(self.web_port) or not process.alive(), 60, "daphne")
        if not process.alive():
            raise RuntimeError(f"daphne died:\n{process.tail()}")

    def check(self) -> None:
        for name, process in self.processes.items():
            if not process.alive():
                raise RuntimeError(f"{name} died:\n{process.tail()}")

    def worker_memory(self) -> dict:
        """Peak RSS (VmHWM) of the workers' parents and of their biggest pool child, in MiB. A threads
        pool has no children: its one process does the work, and `peak_mib` is the biggest such
        process's peak either way (the biggest of the processes that run tasks)."""
        workers = self.workers
        kids = [memory_kib(pid) for worker in workers for pid in children(worker.popen.pid)]
        parents = [memory_kib(worker.popen.pid) for worker in workers]
        child_peak = max((k.get("VmHWM", 0) for k in kids), default=0) / 1024
        parent_peak = max(p.get("VmHWM", 0) for p in parents) / 1024
        return {
            "parent_peak_mib": parent_peak,
            "child_peak_mib": child_peak,
            "children": len(kids),
            "processes": len(workers),
            "peak_mib": child_peak if kids else parent_peak,
            "total_peak_mib": sum(p.get("VmHWM", 0) for p in parents + kids) / 1024,
            "pool": workers[0].pool,
            "concurrency": workers[0].concurrency,
        }

    def reset_peak_memory(self) -> None:
        """Peaks from now on (worker, its children, daphne): see reset_peak_memory()."""
        for process in [*self.workers, *([self.processes["web"]] if "web" in self.processes else [])]:
            pid = process.popen.pid
            for each in (pid, *children(pid)):
                reset_peak_memory(each)

    def daphne_memory(self) -> dict:
        values = memory_kib(self.processes["web"].popen.pid)
        return {"peak_mib": values.get("VmHWM", 0) / 1024, "now_mib": values.get("VmRSS", 0) / 1024}

    def stop(self) -> None:
        for process in reversed(list(self.processes.values())):
            process.stop()
        self.processes.clear()
        drop_postgres_database(self)


# --- PostgreSQL: a fresh database beside the one DATABASE_URL names ---------------------------------


def is_postgres(url: str) -> bool:
    return urlparse(url).scheme in ("postgres", "postgresql", "pgsql")


def create_postgres_database(stack: Stack, url: str) -> str:
    """CREATE DATABASE <name>_bench_<pid> on the server DATABASE_URL points at; dropped at the end."""
    import psycopg

    parsed = urlparse(url)
    name = f"{(parsed.path.lstrip('/') or 'hitl')}_bench_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    stack.created_database = url
    return urlunparse(parsed._replace(path=f"/{name}"))


def drop_postgres_database(stack: Stack) -> None:
    if not stack.created_database:
        return
    import psycopg

    name = urlparse(stack.database_url).path.lstrip("/")
    try:
        with psycopg.connect(stack.created_database, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception as exc:  # a benchmark that cannot clean up says so and goes on
        print(f"could not drop the bench database {name}: {exc}", file=sys.stderr)
    stack.created_database = ""
