"""CPU time of processes, read from /proc (Linux): what a workload cost each process of the stack,
whatever else the (shared, 2-core) machine was doing meanwhile. Far steadier than wall time.

A process's /proc/<pid>/stat holds utime and stime for all its threads, and cutime and cstime for
the children it has waited for; a process's CPU here is those four plus, recursively, its live
children's. So a prefork pool's work counts in its parent's figure, even for a child that was
replaced between two readings (its whole life then shows in the parent's cutime).
"""
import os
import time
from pathlib import Path

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses);
    field 3 of proc(5), the state, is index 0 here. None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def own_cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), in seconds; 0 when it is gone."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND if fields else 0.0


def live_children(pid: int) -> list[int]:
    """The process's children now alive, whichever of its threads started them."""
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    for task in tasks:
        try:
            found.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            pass
    return sorted(set(found))


def cpu_seconds(pid: int) -> float:
    """CPU seconds the process and its descendants have used: its own and its waited-for children's
    (utime, stime, cutime, cstime), plus its live children's, recursively; 0 when it is gone."""
    fields = _stat_fields(pid)
    if not fields:
        return 0.0
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / TICKS_PER_SECOND + sum(cpu_seconds(child) for child in live_children(pid))


def self_cpu_seconds() -> float:
    """This process's own CPU seconds (user + system, all threads), as os.times() says: for a
    process that measures a workload it runs itself."""
    times = os.times()
    return times.user + times.system


class CpuMeter:
    """CPU seconds each named process used between `start()` and `stop()`.

        meter = CpuMeter({"daphne": 1234, "worker": 1240}).start()
        ...  # the workload
        used = meter.stop()    # {"daphne": 0.82, "worker": 1.31}
    """

    def __init__(self, pids: dict[str, int]):
        self.pids = dict(pids)
        self.before: dict[str, float] = {}
        self.started_at = 0.0
        self.wall_s = 0.0

    def read(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def start(self) -> "CpuMeter":
        self.before = self.read()
        self.started_at = time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        after = self.read()
        self.wall_s = time.monotonic() - self.started_at
        return {name: max(after[name] - self.before[name], 0.0) for name in self.pids}


def per_unit_ms(used: dict[str, float], units: int) -> dict:
    """CPU seconds per process → milliseconds per unit (a conversation, a resume), with their sum."""
    units = max(units, 1)
    each = {name: seconds * 1000 / units for name, seconds in used.items()}
    return {"per_process_ms": each, "sum_ms": sum(each.values()), "seconds": dict(used), "units": units}
