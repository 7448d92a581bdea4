"""Fewer questions, measured (issue 40, item 5): one scripted day of 200 mixed demo calls, three times
on the stack `make run` starts (bench/screens.py's: redis-server, the Procfile's worker, beat, daphne,
a throwaway SQLite database, the scripted model), everything through the JSON API as programs and
people would use it:

1. **without**: the demo agent as it ships: every gated call asks a person;
2. **shadow**: the AI reviewer on (`PATCH /api/agents/demo`: scripted/reviewer, up to medium risk),
   and two allow rules saved in the shadow (`POST /api/rules` with `"mode": "shadow"`): they decide
   nothing, and count what they would have changed; then both are promoted (`POST .../promote`);
3. **with**: the same day again, the reviewer and the promoted rules deciding what they may.

A person (the demo's approver) approves whatever waits, through the API. Printed: per run, the calls
gated, the questions people had to answer, what the reviewer approved and escalated, what rules
decided; the shadow's would-change counts beside what the promoted rules then decided; the ratio
of questions with to without. It is a benchmark, never a test; it fails only if something does not
work (a conversation that never settles).

    .venv/bin/python -m bench.fewer_questions
"""
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from bench.screens import start_stack
from bench.stack import ROOT, log

PEOPLE = 6  # conversations in flight at once
SHADOW_RULES = [
    {"effect": "allow", "tool": "send_email", "arguments": {"to": "*@example.com"}, "note": "mail within example.com"},
    {"effect": "allow", "tool": "delete_file", "arguments": {"path": "tmp/*"}, "note": "scratch files"},
]


def the_day(seed: int = 40) -> list[str]:
    """200 messages, each one call, in a fixed shuffled order."""
    day = (
        [f"write note {n} to notes/n{n}.txt" for n in range(60)]  # medium: the reviewer may approve
        + [f"write x to ../escape{n}.txt" for n in range(15)]  # leaves the folder: the reviewer escalates
        + [f"write rm -rf build to notes/cmd{n}.txt" for n in range(10)]  # 'rm': the reviewer escalates
        + [f"read notes/n{n}.txt" for n in range(20)]  # not gated
        + ["list files"] * 15  # not gated
        + [f"what is {n} + {n}" for n in range(10)]  # calculate: not gated
        + [f"email team{n}@example.com about status {n}" for n in range(30)]  # high: a rule may, once live
        + [f"delete tmp/t{n}.txt" for n in range(30)]  # high: a rule may, once live
        + [f"delete notes/old{n}.txt" for n in range(10)]  # high: always a person
    )
    assert len(day) == 200
    random.Random(seed).shuffle(day)
    return day


def token_for(env: dict, username: str, *, may_change_agents: bool = False) -> str:
    grant = (
        "from django.contrib.auth.models import Permission; "
        f"User.objects.get(username={username!r}).user_permissions.add(Permission.objects.get(codename='change_agent')); "
        if may_change_agents else ""
    )
    code = (
        "from django.contrib.auth.models import User; from chat.models import ApiToken; " + grant
        + f"print(ApiToken.issue(User.objects.get(username={username!r})))"
    )
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


class Api:
    def __init__(self, base_url: str, token: str):
        self.client = httpx.Client(base_url=f"{base_url}/api/", headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def call(self, method: str, path: str, body=None, expect=(200, 201, 202)) -> dict:
        response = self.client.request(method, path, json=body)
        if response.status_code not in expect:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return response.json() if response.content else {}


def settle(owner: Api, approver: Api, text: str) -> dict:
    """One message of the day: its conversation run to the end, a person approving what waits."""
    conversation = owner.call("POST", "conversations", {"agent": "demo", "message": text})["id"]
    asked = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        body = owner.call("GET", f"conversations/{conversation}")
        calls = [call for message in body["messages"] for call in message["tool_calls"]]
        waiting = [call["approval"] for call in calls if call["approval"] and call["approval"]["status"] == "pending"]
        reviewing = [a for a in waiting if a["review_state"] == "reviewing"]
        if body["status"] == "idle" and not waiting:
            return {"calls": calls, "asked": asked}
        for approval in waiting if not reviewing else []:
            approver.call("POST", f"approvals/{approval['id']}/decision", {"decision": "approve", "shown_hash": approval["shown_hash"]})
            asked += 1
        time.sleep(0.05)
    raise RuntimeError(f"conversation {conversation} ({text!r}) did not settle within 60 s")


def run_day(owner: Api, approver: Api, day: list[str]) -> dict:
    started = time.monotonic()
    with ThreadPoolExecutor(PEOPLE) as people:
        results = list(people.map(lambda text: settle(owner, approver, text), day))
    approvals = [call["approval"] for result in results for call in result["calls"] if call["approval"]]
    return {
        "calls": sum(len(result["calls"]) for result in results),
        "gated": len(approvals),
        "asked": sum(result["asked"] for result in results),
        "reviewer_approved": sum(a["decided_via"] == "reviewer" for a in approvals),
        "reviewer_escalated": sum(a["review_state"] == "escalated" for a in approvals),
        "rules_decided": sum(a["decided_via"] == "rule" for a in approvals),
        "seconds": time.monotonic() - started,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hitl-fewer-") as tmp:
        stack = start_stack(Path(tmp))
        try:
            env = os.environ | stack.env()
            owner = Api(stack.base_url, token_for(env, "demo"))
            approver = Api(stack.base_url, token_for(env, "approver", may_change_agents=True))
            day = the_day()

            log("1. without: the agent as it ships")
            without = run_day(owner, approver, day)

            log("2. shadow: the reviewer on, two allow rules in the shadow")
            approver.call("PATCH", "agents/demo", {"reviewer_model": "scripted/reviewer", "reviewer_max_risk": "medium"})
            # The rules' calls are high risk: an allow rule may approve them only under a high ceiling (the admin's field).
            subprocess.run([sys.executable, "manage.py", "shell", "-c",
                            "from chat.models import Agent; a = Agent.objects.get(slug='demo'); a.max_auto_approve_risk = 'high'; a.save()"],
                           cwd=ROOT, env=env, check=True)
            shadows = [approver.call("POST", "rules", {"scope": "agent", "agent": "demo", "mode": "shadow", **rule}) for rule in SHADOW_RULES]
            shadow = run_day(owner, approver, day)
            would = [approver.call("GET", f"rules/{rule['id']}")["would_have"] for rule in shadows]
            for rule in shadows:
                approver.call("POST", f"rules/{rule['id']}/promote")

            log("3. with: the reviewer and the promoted rules")
            with_both = run_day(owner, approver, day)
            oversight = approver.call("GET", "analytics/approvals?days=1")["oversight"]
        finally:
            stack.stop()

    print()
    print(f"One scripted day of {len(day)} demo calls, three times (bench/fewer_questions.py):")
    print()
    print("| run | calls | gated | people asked | reviewer approved | reviewer escalated | rules decided | wall time |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, run in (("without", without), ("shadow (reviewer on, rules in the shadow)", shadow), ("with (reviewer and promoted rules)", with_both)):
        print(f"| {name} | {run['calls']} | {run['gated']} | {run['asked']} | {run['reviewer_approved']} | {run['reviewer_escalated']} "
              f"| {run['rules_decided']} | {run['seconds']:.1f} s |")
    print()
    for rule, counts in zip(SHADOW_RULES, would):
        print(f"shadow rule allow {rule['tool']} {rule['arguments']}: would have allowed {counts['allow']}, changed {counts['changed']}")
    print(f"rules decided once promoted: {with_both['rules_decided']} (the shadow said {sum(c['changed'] for c in would)})")
    print(f"questions for people: {with_both['asked']} with / {without['asked']} without = {with_both['asked'] / without['asked']:.2f}")
    print(f"the reviewer's approvals got wrong (undone, or denied by a later rule): {sum(row['reviewer_wrong'] for row in oversight)}")


if __name__ == "__main__":
    main()
