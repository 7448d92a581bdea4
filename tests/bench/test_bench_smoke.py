"""The benchmarks still run (a tiny smoke run): never a timed test, only "does it work". It starts a
stack of its own (bench/stack.py), so it needs none of tests/e2e's fixtures; it runs with the unit
tests, whose lane of bin/run-tests ends minutes before the end-to-end tests' does."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_run_and_measure_cpu_and_count_statements_and_pushes(tmp_path):
    figures = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "bench/run.py", "--smoke", "--json", str(figures)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Whole cycle" in done.stdout and "Floors" in done.stdout
    assert "CPU per conversation" in done.stdout and "statements" in done.stdout
    section = json.loads(figures.read_text())["concurrency"]
    for workload in [*section["starts"], section["resume"]]:
        cpu = workload["cpu"]
        assert {"daphne", "worker", "beat", "redis"} <= set(cpu["per_process_ms"])
        assert cpu["per_process_ms"]["daphne"] > 0 and cpu["sum_ms"] == pytest.approx(sum(cpu["per_process_ms"].values()))
        counted = workload["counts"]  # counted in the worker processes, not estimated
        assert counted["steps"] >= workload.get("approved", workload["conversations"])
        assert counted["statements"] > counted["steps"] and counted["pushes"] > 0
