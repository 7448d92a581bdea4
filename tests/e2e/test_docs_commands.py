"""The commands of README.md and docs/*.md, run as written against the real stack (issue 37, item 4:
every command in the README and docs/ runs as written on a fresh machine after `make run`).

Each ```sh or ```bash block of those pages is either run here (RUN, with what its own comments say
comes back) or listed in NOT_RUN with the reason it cannot run here; a block that is neither fails
`test_every_shell_block_is_run_or_listed`, and so does a listed one the pages no longer have, so a
new command in the docs is run or explained. Python blocks are listed too: docs/a2a.md's client is
run, the others say why not.

A block runs as written, in this checkout, but for these substitutions (and no others):
- `localhost:8000` and `127.0.0.1:8000` → the stack's 127.0.0.1:<port> (daphne on a free port);
- `.venv/bin/python manage.py` → this virtualenv's python running this checkout's manage.py, in the
  stack's environment (stack.env: its DATABASE_URL, REDIS_URL, ...: each block runs in it), so that
  `create_api_token demo` writes to the database the stack reads;
- in docs/a2a.md's Python client, `<token>` → a token of `demo` made with `create_api_token`.
Before each block `manage.py setup_demo` (with the stack's environment) makes the demo users and
agents, as `make run` does. A variable a block needs and its page never sets is set by the test
(GIVEN says how); a block that needs what an earlier block of its page set runs after that block,
in the same shell (Run.after; no page needs it today: the blocks of each page stand alone).

Each block runs in a fresh `bash -euo pipefail -c BLOCK` with a timeout: -e so that a command that
fails midway (a create_api_token that finds no user, a python3 that cannot parse an answer) fails the
block, rather than being hidden by a later command's status; -u so that a variable the page never
sets is an error, not an empty header; pipefail so that `curl ... | python3 ...` fails with curl.
`curl -s` exits 0 on an HTTP error too: what came back is checked on the output, as the comments say.
"""
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from approvals.models import Approval
from tests.conftest import wait_until
from tests.e2e.conftest import ROOT, Api, Stack

pytestmark = pytest.mark.e2e

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
BLOCK_TIMEOUT = 90  # seconds: api.md's block holds a long poll (?wait=60) until a person decides
PENDING = Approval.Status.PENDING


@dataclass(frozen=True)
class Block:
    page: str  # relative to the checkout: "README.md", "docs/api.md"
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def key(self) -> tuple[str, str]:
        """How RUN and NOT_RUN name a block: its page and its first line."""
        return self.page, self.text.strip().splitlines()[0].strip()


def blocks(langs: set[str] = SHELLS | {"python"}) -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for fence in FENCE.finditer(text):
            if fence["lang"] in langs:
                line = text.count("\n", 0, fence.start()) + 1
                found.append(Block(str(page.relative_to(ROOT)), line, fence["lang"], textwrap.dedent(fence["body"])))
    return found


def blocks_by_key() -> dict[tuple[str, str], Block]:
    found = {}
    for block in blocks():
        assert block.key not in found, f"{block.page}:{block.line} starts as line {found[block.key].line} does: RUN cannot tell them apart"
        found[block.key] = block
    return found


# --- what the test sets, and what a person does -------------------------------------------------


def create_api_token(username: str, *args: str) -> str:
    """`manage.py create_api_token USER`, run here: this process shares the stack's database."""
    out = StringIO()
    call_command("create_api_token", username, *args, stdout=out)
    return out.getvalue().strip()


def demo_token(stack: Stack) -> str:
    return create_api_token("demo")


def operator_header(stack: Stack) -> str:
    """$H of the routes' block, which docs/approvals-and-rules.md never sets: a bearer header (as the
    README's H) of "a token of a user who may manage routes (your superuser: create_api_token
    <superuser>)". `demo` may not (the page's "`demo` gets 403"): this is a superuser, as the README
    says to make one for the admin."""
    User.objects.create_superuser("admin", "admin@example.com", "admin")
    return f"Authorization: Bearer {create_api_token('admin')}"


GIVEN: dict[str, Callable[[Stack], str]] = {"TOKEN": demo_token, "H": operator_header}  # the rules' block: "a token of `demo`"


def approve_outside_request_as_approver(stack: Stack, running: subprocess.Popen) -> None:
    """docs/api.md: "log in as `approver` and approve it under Approvals", while the block's long
    poll waits. The page's Approve goes through the decision service as the API does: here through
    the API, as `approver`, on daphne."""
    pending = Approval.objects.filter(status=PENDING, conversation__agent__slug="outside")
    wait_until(lambda: running.poll() is not None or pending.exists(), timeout=30, message="the outside request to wait")
    approval = pending.first()
    if approval is None:
        return  # the block ended first: its output says why
    approver = Api(stack.base_url, User.objects.get(username="approver"))
    response = approver.post(f"approvals/{approval.pk}/decision", {"decision": "approve"})
    approver.http.close()
    assert response.status_code == 200, response.text


# --- the blocks run, and the blocks not run ------------------------------------------------------


@dataclass(frozen=True)
class Run:
    shows: tuple[str, ...] = ()  # patterns its output must show: what the block's comments say comes back
    given: tuple[str, ...] = ()  # variables the page never sets (GIVEN)
    person: Callable[[Stack, subprocess.Popen], None] | None = None  # what a person does while it runs
    later: str = ""  # the block's last command, run again in the state it left, must show this within a timeout
    after: str = ""  # the first line of an earlier block of the same page, run first in the same shell
    substitute: dict[str, Callable[[Stack], str]] = field(default_factory=dict)  # a Python block's placeholders


RUN: dict[tuple[str, str], Run] = {
    ("README.md", "TOKEN=$(.venv/bin/python manage.py create_api_token demo)"): Run(
        shows=(
            r"(?m)^\d+ \d+$",  # echo "$A $B": "two pending delete_file calls"
            r'"status": "rejected".*"rejection_reason": "keep a.txt"',  # the two decisions
            r'"status": "approved"',
        ),  # "-> 201, status "running"" is piped into python3, not shown: the id it prints is the one the rest uses
        # "a moment later: the model quotes your reason, and says b.txt did not exist"
        later=r"(?s)^(?=.*I did not delete a\.txt \(Rejected by demo: keep a\.txt\))(?=.*I could not delete b\.txt: No file named 'b\.txt')",
    ),
    (
        "docs/ag-ui.md",
        "TOKEN=$(.venv/bin/python manage.py create_api_token demo)   # made to decide: a token made to ask cannot resume with a decision",
    ): Run(
        shows=(
            r'"type":"RUN_FINISHED".*"outcome":\{"type":"interrupt","interrupts":\[\{"id":"\d+","reason":"tool_approval"',
            r'"type":"TOOL_CALL_RESULT"',
            r'"type":"TEXT_MESSAGE_CONTENT".*I did write a\.txt: ',
            r'"type":"RUN_FINISHED".*"outcome":\{"type":"success"',
        ),
    ),
    ("docs/api.md", "TOKEN=$(.venv/bin/python manage.py create_api_token demo --scope ask)   # asks and reads; decides nothing"): Run(
        person=approve_outside_request_as_approver,  # once the request waits ("-> 201 {..., "status": "pending", ...}")
        shows=(r'"status": "approved".*"decided_by": "approver"',),  # "answers when decided"
    ),
    ("docs/approvals-and-rules.md", 'curl -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" localhost:8000/api/rules \\'): Run(
        given=("TOKEN",),
        shows=(r'"id": \d+.*"uses": 0',),  # 201 {"id": 4, "uses": 0, ...}
    ),
    ("docs/approvals-and-rules.md", "curl -s -H \"$H\" -H 'Content-Type: application/json' localhost:8000/api/routes \\"): Run(
        given=("H",),
        # 201 with "id" and every field, defaults included
        shows=(r'"id": \d+', r'"tool": "delete_file"', r'"min_risk": "high"', r'"quorum": 2', r'"remind_after_seconds": null'),
    ),
    ("docs/a2a.md", "import asyncio, httpx"): Run(
        substitute={"<token>": demo_token},  # a token that decides: the block approves through A2A itself
        shows=(r"INPUT_REQUIRED 1 call waits for a human decision", r"(?m)^I did write a\.txt: Wrote 5 bytes to a\.txt\.$"),
    ),
}

SERVES = "`make run` serves until Ctrl-C"
NO_DOCKER = "no Docker on the test machine"
DEPLOY = "printf 'SECRET_KEY=%s\\nHITL_HOST=hitl.example.com\\nPOSTGRES_PASSWORD=%s\\n' \\"
TCK = (
    "cd a2a-tck && HITL_TCK_TOKEN=<token> PYTHONPATH=<hitl>/bench ./run_tck.py"
    " --sut-host http://127.0.0.1:8000/a2a/demo --level must -- -p a2a_tck_auth"
)
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "make run    # virtualenv, redis-server (apt-get), migrations, demo users + agents; then Redis, two Celery"): (
        f"CI runs it itself: `make test` runs this test on the stack tests/e2e/conftest.py starts; {SERVES}"
    ),
    ("README.md", "OPENAI_API_KEY=sk-... make run"): f"a hosted model and its key; {SERVES}",
    ("README.md", DEPLOY): NO_DOCKER,
    ("docs/operations.md", DEPLOY): NO_DOCKER,
    ("docs/operations.md", "OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 make run   # a collector's OTLP/HTTP port"): (
        f"an OTLP collector; {SERVES} (tests/e2e/telemetry/test_telemetry_e2e.py exports to a local collector)"
    ),
    ("docs/BENCHMARKS.md", "python3 bench/run.py --concurrency-only"): (
        "a benchmark of minutes that wants the machine to itself, with the peers of requirements-bench.txt"
        " installed from the registries (tests/bench/test_bench_smoke.py runs the bench briefly)"
    ),
    ("docs/a2a.md", TCK): "needs a checkout of a2aproject/a2a-tck (no internet at test time)",
    # Python blocks: not required to run; each says why it is not.
    ("docs/api.md", "from hitl_client import Client, gate"): (
        "a sketch: `token` and `run_deploy` are yours (tests/e2e/outside/test_python_client_e2e.py runs the client)"
    ),
    ("docs/approvals-and-rules.md", "import hashlib, hmac, time"): (
        "a fragment of a webhook receiver; tests/security/test_webhook_replay.py runs it on a real delivery"
    ),
    ("docs/mcp-gateway.md", "import asyncio, httpx2   # httpx2: the HTTP client the mcp SDK is built on"): (
        "TOKEN comes from the environment and a human decides while it waits (tests/e2e/protocols/test_mcpgateway_e2e.py"
        " runs the gateway)"
    ),
}


def test_every_shell_block_is_run_or_listed():
    found = blocks_by_key()
    unexplained = [f"{block.page}:{block.line}: {key[1]}" for key, block in found.items() if key not in RUN and key not in NOT_RUN]
    assert not unexplained, "run these blocks in RUN, or say in NOT_RUN why they cannot run here:\n" + "\n".join(unexplained)
    gone = [f"{page}: {first}" for page, first in [*RUN, *NOT_RUN] if (page, first) not in found]
    assert not gone, "no page has these blocks any more: remove them from RUN or NOT_RUN:\n" + "\n".join(gone)
    assert not set(RUN) & set(NOT_RUN)


# --- running one ---------------------------------------------------------------------------------


@dataclass
class Result:
    block: Block
    script: str
    returncode: int | None
    stdout: str
    stderr: str

    def report(self) -> str:
        return (
            f"{self.block.page}:{self.block.line} exited {self.returncode}\n--- as run ---\n{self.script}\n"
            f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )


def as_run(text: str, stack: Stack) -> str:
    """The block with the substitutions of the module's docstring, and no others."""
    host = stack.base_url.removeprefix("http://")
    text = text.replace("localhost:8000", host).replace("127.0.0.1:8000", host)
    return text.replace(".venv/bin/python manage.py", f"{sys.executable} {ROOT / 'manage.py'}")


def run(block: Block, spec: Run, stack: Stack, tmp_path: Path) -> Result:
    env = stack.env | {name: GIVEN[name](stack) for name in spec.given}
    script = as_run(block.text, stack)
    if spec.after:
        script = as_run(blocks_by_key()[block.page, spec.after].text, stack) + "\n" + script
    for placeholder, value in spec.substitute.items():
        script = script.replace(placeholder, value(stack))
    if block.lang == "python":
        args = [sys.executable, "-c", script]
    else:
        if spec.later:  # keep the variables the block set, for its last command run again
            assigned = sorted(set(re.findall(r"(?m)^\s*([A-Z_][A-Z0-9_]*)=", block.text)))
            script += f"\ndeclare -p {' '.join(assigned)} > {shlex.quote(str(tmp_path / 'state'))}"
        args = ["bash", "-euo", "pipefail", "-c", script]
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
        try:
            if spec.person:
                spec.person(stack, process)
            process.wait(timeout=BLOCK_TIMEOUT)
        except BaseException:
            process.kill()
            process.wait()
            print(Result(block, script, None, out.read_text(), err.read_text()).report())
            raise
    return Result(block, script, process.returncode, out.read_text(), err.read_text())


def run_again(command: str, state: Path, env: dict, shows: str) -> str:
    """`command` in a fresh shell with the variables the block left, until its output shows `shows`."""
    seen = []

    def shown():
        script = f"source {shlex.quote(str(state))}\n{command}"
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
        seen[:] = [f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"]
        return done.returncode == 0 and re.search(shows, done.stdout)

    try:
        wait_until(shown, timeout=30, interval=0.2, message=f"{command!r} to show {shows!r}")
    except AssertionError:
        print(f"--- {command} ---\n{seen[0] if seen else ''}")
        raise
    return seen[0]


def listed_to_run() -> list:
    found = {block.key: block for block in blocks()}
    return [pytest.param(found.get(key), RUN[key], id=f"{key[0]}:{found[key].line if key in found else 'gone'}") for key in RUN]


@pytest.fixture
def demo(e2e):
    """The stack, with the demo users and agents as `make run` makes them: `manage.py setup_demo` in its environment."""
    done = subprocess.run([sys.executable, "manage.py", "setup_demo"], cwd=ROOT, env=e2e.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return e2e


@pytest.mark.parametrize(("block", "spec"), listed_to_run())
def test_block_runs_as_written(block, spec, demo, tmp_path):
    assert block is not None, "the pages no longer have this block (test_every_shell_block_is_run_or_listed says which)"

    result = run(block, spec, demo, tmp_path)
    print(result.report())  # shown with -rP

    assert result.returncode == 0, result.report()
    for shows in spec.shows:
        assert re.search(shows, result.stdout), f"the output does not show {shows!r}\n{result.report()}"
    if spec.later:
        last = as_run(block.text, demo).strip().splitlines()[-1]
        print(f"--- {last} (again) ---\n{run_again(last, tmp_path / 'state', demo.env, spec.later)}")
