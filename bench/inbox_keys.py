"""A competent approver clears 20 mixed pending calls by keyboard in the inbox (issue 38, "done when").

Starts what `make run` starts (bench/screens.py's stack: redis-server, the Procfile's worker, beat and
daphne on loopback, a throwaway SQLite database set up by `migrate` and `setup_demo`, the scripted
model). The demo's owner asks, through the JSON API, for 20 calls of every kind: plain writes and
emails, alike deletes, a critical "delete all files", a choice question, a plan, and three outside
agent requests. Chromium, as the demo's approver, opens the inbox and clears it with keys alone, as
the shortcut list says: `j` to the first row, then per row `a` (it opens: its preview on screen, a
question's first choice or a critical call's confirmation focused) and the key that decides (`a`
again, Enter, or the typed confirmation and Enter). Before each deciding key the script checks that
the row's preview is on screen; a row whose preview is not fails the run.

Printed: the page time (first key to an empty inbox, Playwright's own round trips included), the
keys pressed, the wait per decision (deciding key to the next row focused) beside the floor measured
in the same run (the same decision as one JSON API POST, 20 times), and their ratio.

    .venv/bin/python -m bench.inbox_keys
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import expect, sync_playwright

from bench.screens import APPROVER, CHROMIUM, CHROMIUM_ARGS, WATCH_SOCKET, start_stack
from bench.stack import ROOT, load, log

TIMEOUT_MS = 20_000
PHRASES = [  # (what the owner asks, how many calls wait then)
    ("delete all files", 1),  # critical
    ("ask me to choose between tea, coffee and water", 1),
    ("plan a tidy-up of the notes", 1),
    *((f"write draft {n} to draft{n}.txt", 1) for n in range(8)),
    *((f"email person{n}@example.com about item {n}", 1) for n in range(4)),
    ("delete old1.txt and old2.txt", 2),  # alike: one group
]
OUTSIDE = [{"service": service} for service in ("web", "db", "api")]  # outside agent requests: alike
KIND = """(id) => { const line = document.getElementById(id);
  if (line.classList.contains('approval-group')) return 'group';
  if (line.querySelector('.answer-form')) return 'question';
  if (line.querySelector('.plan-form')) return 'plan';
  if (line.classList.contains('row-critical')) return 'critical';
  return 'action'; }"""
# Every preview of the line (a group: each of its calls') inside the screen, within a few pixels.
PREVIEW_ON_SCREEN = """(id) => { const line = document.getElementById(id);
  const height = window.innerHeight;
  return Array.from(line.querySelectorAll('.preview')).every((figure) => {
    const rect = figure.getBoundingClientRect();
    return rect.width > 0 && rect.top >= -4 && rect.bottom <= height + 4; }); }"""


def token_for(env: dict, username: str) -> str:
    code = f"from django.contrib.auth.models import User; from chat.models import ApiToken; print(ApiToken.issue(User.objects.get(username={username!r})))"
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip().splitlines()[-1]


def pending(api: httpx.Client) -> list[dict]:
    return api.get("approvals", params={"status": "pending", "limit": 500}).json()["items"]


def wait_for(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def ask_for_calls(api: httpx.Client, count_before: int) -> int:
    waiting = count_before
    for phrase, calls in PHRASES:
        response = api.post("conversations", json={"agent": "demo", "message": phrase})
        response.raise_for_status()
        waiting += calls
        wait_for(lambda: len(pending(api)) >= waiting, f"{waiting} pending after {phrase!r}")
    for arguments in OUTSIDE:
        response = api.post("approval-requests", json={"agent": "outside", "tool": "deploy", "arguments": arguments, "thread": "release-7"})
        response.raise_for_status()
        waiting += 1
    return waiting


def floor(api: httpx.Client, rounds: int) -> list[float]:
    """The same decision as one JSON API POST: what a decision costs the server, measured here."""
    for n in range(rounds):
        api.post("conversations", json={"agent": "demo", "message": f"write floor {n} to floor{n}.txt"}).raise_for_status()
    wait_for(lambda: len(pending(api)) >= rounds, f"{rounds} floor calls pending")
    times = []
    for approval in pending(api):
        started = time.perf_counter()
        response = api.post(f"approvals/{approval['id']}/decision", json={"decision": "approve", "shown_hash": approval["shown_hash"]})
        times.append(time.perf_counter() - started)
        response.raise_for_status()
    return times


def clear_by_keys(browser, base_url: str, expected: int) -> dict:
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(WATCH_SOCKET)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(APPROVER[0])
    page.get_by_label("Password").fill(APPROVER[1])
    page.get_by_role("button", name="Log in").click()
    page.goto("/approvals/")
    expect(page.locator("html")).to_have_attribute("data-ws-opens", "1")  # pushes reach the page from here on
    expect(page.locator("#dashboard-count")).to_have_attribute("data-count", str(expected))
    keys, waits, decided = 0, [], 0

    def press(key: str) -> None:
        nonlocal keys
        page.keyboard.press(key)
        keys += 1

    started = time.perf_counter()
    press("j")
    while True:
        line = page.locator("#dashboard-rows .is-focused")
        expect(line).to_have_count(1)
        line_id = line.get_attribute("id")
        kind = page.evaluate(KIND, line_id)
        press("a")
        expect(page.locator(f"#{line_id} > .row-open")).to_have_attribute("open", "")
        if not page.evaluate(PREVIEW_ON_SCREEN, line_id):
            raise RuntimeError(f"{line_id} ({kind}): its preview is not on screen before the decision")
        pressed = time.perf_counter()
        if kind in ("group", "plan"):
            if kind == "group":
                press("a")  # to "Approve these N"
            press("Enter")
        elif kind == "critical":
            confirmation = page.locator(f"#{line_id} input[name=confirmation]")
            hint = confirmation.get_attribute("data-confirmation-hint")
            page.keyboard.type(hint)
            keys += len(hint)
            press("Enter")
        elif kind == "question":
            press("Enter")  # its first choice, focused
        else:
            press("a")
        expect(page.locator(f"#{line_id}")).to_have_count(0)
        decided += 1
        if page.locator("#dashboard-rows [data-line]").count() == 0:
            waits.append(time.perf_counter() - pressed)
            break
        expect(page.locator("#dashboard-rows .is-focused")).to_have_count(1)
        waits.append(time.perf_counter() - pressed)
    seconds = time.perf_counter() - started
    context.close()
    return {"seconds": seconds, "keys": keys, "rows": decided, "waits": waits}


def main() -> int:
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is not installed: run bin/ensure-system-packages --test", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="hitl-inbox-keys-") as work:
        stack = start_stack(Path(work))
        try:
            env = os.environ | stack.env()
            api = httpx.Client(base_url=f"{stack.base_url}/api/", headers={"Authorization": f"Bearer {token_for(env, 'demo')}"}, timeout=30)
            approver_api = httpx.Client(base_url=f"{stack.base_url}/api/", headers={"Authorization": f"Bearer {token_for(env, 'approver')}"}, timeout=30)
            log("asking for 20 mixed calls")
            calls = ask_for_calls(api, len(pending(api)))
            log(f"{calls} pending; the approver clears them by keyboard")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                run = clear_by_keys(browser, stack.base_url, calls)
                browser.close()
            left = len(pending(approver_api))
            if left:
                raise RuntimeError(f"{left} calls still pending after the keyboard run")
            log("the floor: the same decision as a JSON API POST")
            floors = floor(approver_api, 20)
            stack.check()
        finally:
            stack.stop()
    wait, floor_median = statistics.median(run["waits"]), statistics.median(floors)
    print(f"load {load()}")
    print(f"{calls} pending calls in {run['rows']} inbox rows, cleared by keyboard in {run['seconds']:.2f} s of page time "
          f"({'under' if run['seconds'] < 20 else 'over'} the 20 s target), {run['keys']} keys, each preview on screen before its decision")
    print(f"wait per decision (deciding key to the next row focused): median {wait * 1000:.0f} ms, max {max(run['waits']) * 1000:.0f} ms")
    print(f"floor (one decision as a JSON API POST, median of {len(floors)}): {floor_median * 1000:.1f} ms; ratio {wait / floor_median:.1f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
