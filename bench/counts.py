"""Counted, not estimated: the SQL statements and the pushes each agent-loop task makes, in the
worker, while the benchmark runs (issue 24). Off unless HITL_BENCH_COUNTS names a directory: then
`bench/worker_app.py` (the bench's worker app, never the app's own) calls `install()`, and each
`advance_conversation` task appends one line to `<dir>/counts-<pid>.tsv`:

    <task name> TAB <steps> TAB <statements> TAB <pushes>

steps: calls of chat.loop._step (one model call, one settled turn, the finish...) in the task;
statements: what Django's default connection executed in the task's thread (an executemany is
one); pushes: events sent to a Channels group (core.live.send_now, which every push goes through).
`read(dir)` sums the lines; the bench reads them before and after a workload.
"""
import os
import threading
from pathlib import Path

_local = threading.local()
_write_lock = threading.Lock()
_installed_in: Path | None = None


class _Tally:
    __slots__ = ("steps", "statements", "pushes")

    def __init__(self):
        self.steps = self.statements = self.pushes = 0


def _count_statement(execute, sql, params, many, context):
    tally = getattr(_local, "tally", None)
    if tally is not None:
        tally.statements += 1
    return execute(sql, params, many, context)


def _patch_once() -> None:
    """Wrap chat.loop._step and core.live.send_now (both looked up through their module at each
    call, so wrapping the module's attribute is enough). Done at the first task: the apps are
    ready then."""
    from chat import loop
    from core import live

    if getattr(loop._step, "_bench_counted", False):
        return
    step, send_now = loop._step, live.send_now

    def counted_step(*args, **kwargs):
        tally = getattr(_local, "tally", None)
        if tally is not None:
            tally.steps += 1
        return step(*args, **kwargs)

    def counted_send_now(*args, **kwargs):
        tally = getattr(_local, "tally", None)
        if tally is not None:
            tally.pushes += 1
        return send_now(*args, **kwargs)

    counted_step._bench_counted = True
    loop._step, live.send_now = counted_step, counted_send_now


def _before_task(sender=None, **kwargs) -> None:
    from django.db import connection

    with _write_lock:
        _patch_once()
    if _count_statement not in connection.execute_wrappers:  # this thread's connection, kept across tasks
        connection.execute_wrappers.append(_count_statement)
    _local.tally = _Tally()


def _after_task(sender=None, **kwargs) -> None:
    tally, _local.tally = getattr(_local, "tally", None), None
    name = getattr(sender, "name", "") or ""
    if tally is None or not name.endswith("advance_conversation"):
        return
    line = f"{name}\t{tally.steps}\t{tally.statements}\t{tally.pushes}\n"
    with _write_lock, (_installed_in / f"counts-{os.getpid()}.tsv").open("a") as out:
        out.write(line)


def install(directory: str | Path) -> None:
    """Count from now on in this (worker) process; lines go to `directory`."""
    global _installed_in
    from celery.signals import task_postrun, task_prerun

    _installed_in = Path(directory)
    _installed_in.mkdir(parents=True, exist_ok=True)
    task_prerun.connect(_before_task, weak=False)
    task_postrun.connect(_after_task, weak=False)


def read(directory: str | Path) -> dict:
    """The sums over every line written so far: tasks, steps, statements, pushes."""
    total = {"tasks": 0, "steps": 0, "statements": 0, "pushes": 0}
    for path in sorted(Path(directory).glob("counts-*.tsv")):
        text = path.read_text()
        for line in text[:text.rfind("\n") + 1].splitlines():  # whole lines only
            parts = line.split("\t")
            if len(parts) != 4:
                continue
            total["tasks"] += 1
            total["steps"] += int(parts[1])
            total["statements"] += int(parts[2])
            total["pushes"] += int(parts[3])
    return total


def difference(before: dict, after: dict) -> dict:
    """What happened between two `read()`s, and per step and per task."""
    used = {key: after[key] - before[key] for key in before}
    steps, tasks = max(used["steps"], 1), max(used["tasks"], 1)
    return used | {
        "statements_per_step": used["statements"] / steps,
        "pushes_per_step": used["pushes"] / steps,
        "statements_per_task": used["statements"] / tasks,
        "pushes_per_task": used["pushes"] / tasks,
    }
