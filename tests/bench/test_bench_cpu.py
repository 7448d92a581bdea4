"""The bench's CPU figures (bench/cpu.py) read real processes' /proc, and its counts (bench/counts.py)
are counted: what a workload cost each process, and the statements and pushes a task made."""
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from bench import counts, cpu

# Spins until it has used `seconds` of CPU, says so, then waits (using none) until its stdin closes.
SPIN = """
import os, sys, time
seconds = float(sys.argv[1])
while sum(os.times()[:2]) < seconds:
    pass
print("spun", flush=True)
sys.stdin.read()
"""

# Starts a spinning child (and, with "reap", waits for it to exit first), says so, then waits.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
child.stdout.readline()
if sys.argv[3] == "reap":
    child.stdin.close()
    child.wait()
print(child.pid, flush=True)
sys.stdin.read()
"""


def start(*args: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-c", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()  # blocks until it has spun


def end(process: subprocess.Popen) -> None:
    process.stdin.close()
    process.wait(10)


def test_a_busy_process_shows_the_cpu_it_used_and_an_idle_one_none_more():
    process, said = start(SPIN, "0.3")
    try:
        assert said == "spun"
        used = cpu.cpu_seconds(process.pid)
        assert 0.3 <= used < 1.5  # its spin, plus starting Python
        time.sleep(0.2)  # idle meanwhile: waiting on its stdin costs nothing
        assert cpu.cpu_seconds(process.pid) - used <= 0.02
    finally:
        end(process)


def test_a_process_counts_its_live_children_and_its_reaped_ones():
    live, child_pid = start(PARENT, SPIN, "0.3", "keep")
    reaped, _ = start(PARENT, SPIN, "0.3", "reap")
    try:
        assert int(child_pid) in cpu.live_children(live.pid)
        assert cpu.own_cpu_seconds(live.pid) < 0.3 <= cpu.cpu_seconds(live.pid)
        assert cpu.live_children(reaped.pid) == []
        assert cpu.cpu_seconds(reaped.pid) >= 0.3  # the waited-for child's time is in the parent's cutime
    finally:
        end(live)
        end(reaped)


# Says it is ready, spins 0.2 s of CPU when told to (a line on its stdin), says so, then waits.
ON_CUE = """
import os, sys
print("ready", flush=True)
sys.stdin.readline()
start = sum(os.times()[:2])
while sum(os.times()[:2]) - start < 0.2:
    pass
print("spun", flush=True)
sys.stdin.read()
"""


def test_the_meter_gives_each_process_what_it_used_meanwhile_and_the_sum_per_conversation():
    busy, _ = start(ON_CUE)
    idle, _ = start(SPIN, "0.05")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        meter = cpu.CpuMeter({"busy": busy.pid, "idle": idle.pid, "gone": gone.pid}).start()
        busy.stdin.write("go\n")
        busy.stdin.flush()
        assert busy.stdout.readline().strip() == "spun"
        used = meter.stop()
        assert 0.19 <= used["busy"] < 0.6 and used["idle"] <= 0.02 and used["gone"] == 0.0
        figures = cpu.per_unit_ms(used, units=10)
        assert figures["per_process_ms"]["busy"] == pytest.approx(used["busy"] * 100)
        assert figures["sum_ms"] == pytest.approx(sum(used.values()) * 100)
    finally:
        end(busy)
        end(idle)


def test_this_process_measures_its_own_cpu():
    before = cpu.self_cpu_seconds()
    deadline = time.monotonic() + 5
    while cpu.self_cpu_seconds() - before < 0.1:
        assert time.monotonic() < deadline
    assert cpu.self_cpu_seconds() - before >= 0.1


def test_counts_are_summed_from_every_worker_process_file_and_a_half_written_line_is_left_for_later(tmp_path):
    (tmp_path / "counts-1.tsv").write_text("chat.tasks.advance_conversation\t2\t30\t5\n")
    (tmp_path / "counts-2.tsv").write_text("chat.tasks.advance_conversation\t3\t40\t6\nchat.tasks.advance_conversation\t1\t1")
    before = {"tasks": 0, "steps": 0, "statements": 0, "pushes": 0}
    after = counts.read(tmp_path)
    assert after == {"tasks": 2, "steps": 5, "statements": 70, "pushes": 11}
    used = counts.difference(before, after)
    assert used["statements_per_step"] == 14 and used["pushes_per_step"] == pytest.approx(2.2)
    assert used["statements_per_task"] == 35


@pytest.mark.django_db
def test_a_task_in_the_worker_writes_the_statements_and_pushes_it_made(tmp_path, monkeypatch, alice):
    from django.contrib.auth.models import User
    from django.db import connection

    from chat import loop
    from core import live

    monkeypatch.setattr(loop, "_step", loop._step)  # put back after the test: install wraps them
    monkeypatch.setattr(live, "send_now", lambda group, event: None)
    monkeypatch.setattr(counts, "_installed_in", tmp_path)
    task = SimpleNamespace(name="chat.tasks.advance_conversation")
    try:
        counts._before_task(sender=task)
        assert User.objects.filter(username="alice").count() == 1
        list(User.objects.all())
        live.push_now("conversation.x", "<p>one</p>")
        live.send_now("approvals", {"type": "html.push", "html": "<p>two</p>"})
        counts._after_task(sender=task)
        counts._before_task(sender=SimpleNamespace(name="chat.tasks.recover_stalled"))  # not a loop task: not written
        User.objects.count()
        counts._after_task(sender=SimpleNamespace(name="chat.tasks.recover_stalled"))
    finally:
        connection.execute_wrappers.remove(counts._count_statement)
    assert counts.read(tmp_path) == {"tasks": 1, "steps": 0, "statements": 2, "pushes": 2}
    User.objects.count()  # no task: nothing counted, nothing written
    assert counts.read(tmp_path)["statements"] == 2
