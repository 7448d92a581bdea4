"""The benchmarks still run (a tiny smoke run): never a timed test, only "does it work"."""
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_run():
    done = subprocess.run(
        [sys.executable, "bench/run.py", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Whole cycle" in done.stdout and "Floors" in done.stdout
