"""bin/keep-running, which the Procfile starts every process of `make run` through: a process that
exits by itself is started again and the reason is said; a stop (SIGTERM, as honcho sends) stops it
for good, with what it runs."""
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import wait_until

KEEP_RUNNING = Path(__file__).resolve().parents[2] / "bin" / "keep-running"


def test_a_process_that_exits_is_started_again_and_a_stop_stops_it_for_good(tmp_path):
    runs = tmp_path / "runs"
    script = f"echo ran >> {runs}; exit 3"
    wrapper = subprocess.Popen([str(KEEP_RUNNING), "bash", "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        # A third start: the second start's exit has then been said too (waiting for two raced its message).
        wait_until(lambda: runs.exists() and len(runs.read_text().split()) >= 3, timeout=15, message="a third start")
    finally:
        wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(timeout=10) == 0
    said = wrapper.stderr.read()
    assert "keep-running: bash exited (status 3); starting it again in 1 s" in said
    assert "starting it again in 2 s" in said  # it backs off while the process keeps failing
    count = len(runs.read_text().split())
    time.sleep(1.5)  # longer than the first backoff: no start after the stop
    assert len(runs.read_text().split()) == count


def test_a_stop_reaches_the_process_it_runs(tmp_path):
    marker, ready = tmp_path / "stopped", tmp_path / "ready"
    script = f"trap 'echo stopped > {marker}; exit 0' TERM; touch {ready}; while true; do sleep 0.1; done"
    wrapper = subprocess.Popen([str(KEEP_RUNNING), "bash", "-c", script])
    wait_until(ready.exists, timeout=10, message="the process's trap set")
    wrapper.send_signal(signal.SIGTERM)

    assert wrapper.wait(timeout=10) == 0
    assert marker.read_text().strip() == "stopped"
