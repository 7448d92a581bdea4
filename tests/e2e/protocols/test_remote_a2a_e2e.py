"""Remote A2A agents as tools across two stacks: ours (the session's stack) and a second one on other
ports (its own daphne, Celery worker and Redis) serving the remote `docs` agent. The outer agent
calls `docs__ask` over A2A (the a2a-sdk client, in our worker); the call that waits for a human
there is decided in our chat, in Chromium, on a card "via docs"; the decision goes over A2A to
the remote task, whose worker writes the file, once. A Stop in our chat cancels the remote task; a
remote that is down is a clear error for the model.

The two stacks share the database (one SQLite file, or one PostgreSQL database). That is honest
enough for what is proven here: nothing crosses from one to the other but HTTP. Each stack has its
own Redis, so the remote's runs are queued to and run by its own worker only, and pushed on its own
channel layer; its files are in its own sandbox root; and the remote's approval is asserted
decided via a2a by the token's user (the robot), never by our people or our services directly. A
second database would add a migration run (tens of seconds) to prove nothing more."""
import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from agentlink.models import RemoteAgent, Task
from approvals.models import Approval
from chat.models import Agent, ApiToken, Conversation, ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    TIMEOUT_MS,
    browser,
    button,
    log_in,
    new_page,
    open_conversation,
    start,
    status_bar,
    wait_for_pending,
    wait_for_status,
)
from tests.e2e.conftest import BIN, Stack, free_port, port_open
from tests.e2e.conftest import start as start_process

pytestmark = pytest.mark.e2e

Status = ToolCall.Status
ACROSS_MS = 30_000  # a deadline for what crosses both stacks (our worker, their daphne and worker, our polling), on a busy machine


@pytest.fixture(scope="module")
def remote_stack(stack, tmp_path_factory):
    """The second stack: Redis, a Celery worker and daphne of its own, on the same database."""
    work = tmp_path_factory.mktemp("remote")
    redis_port, web_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = stack.env | {"REDIS_URL": redis_url, "HITL_VAR_DIR": str(work / "var"), "HITL_SANDBOX_ROOT": str(work / "sandboxes")}
    processes = {
        "remote-redis": start_process(
            "remote-redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(work)], env, work,
        ),
    }
    wait_until(lambda: port_open(redis_port), timeout=10, message="the remote's redis-server")
    processes["remote-worker"] = start_process(
        "remote-worker", [str(BIN / "celery"), "-A", "hitl", "worker", "--loglevel", "INFO", "--without-mingle", "--without-gossip",
                          "--hostname", "remote@%h"], env, work,
    )
    processes["remote-web"] = start_process(
        "remote-web", [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(web_port), "hitl.asgi:application"], env, work,
    )
    remote = Stack(f"http://127.0.0.1:{web_port}", f"ws://127.0.0.1:{web_port}", redis_url, work / "sandboxes", processes, env, work)
    try:
        wait_until(lambda: port_open(web_port), timeout=30, message="the remote's daphne")
        wait_until(lambda: "ready." in processes["remote-worker"].log.read_text(), timeout=60, message="the remote's celery worker")
        # For the module's tests, the session stack's processes include these: a failure in any phase
        # of a test (its teardown's wait for the workers too) prints what both stacks logged meanwhile.
        stack.processes.update(processes)
        yield remote
    except BaseException:
        print(remote.logs())
        raise
    finally:
        for name in processes:
            stack.processes.pop(name, None)
        for process in reversed(processes.values()):
            process.stop()


@pytest.fixture
def docs(e2e, remote_stack, agent):
    """`docs` on the second stack (write_file waits for a human there), registered here as a remote
    agent of the demo agent, with a token of the robot user the remote knows us as."""
    Agent.objects.create(
        slug="docs", name="Docs agent", model="scripted/demo", tools=agent.tools, require_approval=["write_file"], open_to_everyone=True,
    )
    robot = User.objects.create_user("outer-robot")
    remote = RemoteAgent.objects.create(
        name="docs", card_url=f"{remote_stack.base_url}/a2a/docs/.well-known/agent-card.json", token=ApiToken.issue(robot),
        timeout_seconds=20,
    )
    agent.tools = [*agent.tools, "docs__ask"]
    agent.save()
    return remote


def ask_docs(api, message: str) -> str:
    return start(api, f"call docs__ask with {json.dumps({'message': message})}")


def relayed(conversation_id: str) -> list[Approval]:
    """The remote's pause, relayed as our pending cards (the remote's worker ran its model first)."""
    wait_until(lambda: Conversation.objects.filter(pk=conversation_id, status=Conversation.Status.WAITING_FOR_APPROVAL).exists(),
               timeout=ACROSS_MS / 1000, message="the remote's pause relayed to our chat")
    return wait_for_pending(conversation_id, 1)


def inner() -> Conversation:
    return wait_until(lambda: Conversation.objects.filter(agent__slug="docs").first(), timeout=TIMEOUT_MS / 1000, message="the remote's conversation")


def outer_call(conversation_id: str) -> ToolCall:
    return ToolCall.objects.get(message__conversation_id=conversation_id, name="docs__ask", asked_by=None)


@contextmanager
def told_on_failure(conversation_id: str, pages: list):
    """A failure prints what was there to see (the conftest adds both stacks' logs): the rows of
    both conversations and the remote's task, and each page's address, cards and status bar."""
    try:
        yield
    except BaseException:
        print(state(conversation_id))
        for page in pages:
            print(page_state(page))
        raise


def state(conversation_id: str) -> str:
    lines = []
    for conversation in Conversation.objects.filter(pk=conversation_id) | Conversation.objects.filter(agent__slug="docs"):
        lines.append(f"conversation {conversation.pk} ({conversation.agent.slug}): {conversation.status} {conversation.error!r}")
        for call in ToolCall.objects.filter(message__conversation=conversation).select_related("approval").order_by("pk"):
            approval = call.approval if call.is_gated else None
            decided = f" approval #{approval.pk} {approval.status} via {approval.decided_via or '-'}" if approval else ""
            lines.append(f"  call {call.pk} {call.name} {call.status}{decided} result={(call.result or '')[:300]!r} error={call.error[:300]!r}")
        for task in Task.objects.filter(conversation=conversation):
            lines.append(f"  task {task.pk}: canceled={task.canceled}")
    return "\n".join(lines)


def page_state(page) -> str:
    try:
        return page.evaluate("""() => [location.href, `status bar: ${document.querySelector('#conversation-status')?.dataset.status}`,
            ...[...document.querySelectorAll('article.tool-card')].map(a => `${a.id} ${a.dataset.tool} ${a.dataset.status}`),
            `socket opens: ${document.documentElement.dataset.wsOpens}`].join('\\n')""")
    except Exception as exc:  # noqa: BLE001  (a closed page says why)
        return f"page: {exc!r}"


HTML = "<img/src=x/onerror=window.pwned=1>hello"  # the remote's preview and arguments carry it: shown as text here


def test_the_remote_call_is_decided_in_our_chat_and_its_file_written_once_there(new_page, alice, api_for, docs, remote_stack, tmp_path):
    conversation_id = ask_docs(api_for(alice), f"write {HTML} to notes.txt")
    pages = []
    with told_on_failure(conversation_id, pages):
        [child] = relayed(conversation_id)
        [inner_approval] = wait_for_pending(str(inner().pk), 1)

        shots = Path(os.environ.get("HITL_SCREENSHOTS") or tmp_path)  # to look at them: HITL_SCREENSHOTS=<dir>
        for width, height in ((1280, 900), (390, 844)):
            page = new_page(width=width, height=height)
            pages.append(page)
            log_in(page, alice)
            open_conversation(page, conversation_id)
            via = page.locator(f'article[data-approval-id="{child.pk}"]')
            expect(via.locator(".via-remote")).to_have_text("Via docs, a remote agent: it runs write_file there once decided here.")
            expect(via).to_contain_text("Via docs (a remote A2A agent): write_file")  # the remote's preview
            expect(via.locator(".gate-note")).to_contain_text("docs, a remote agent, asks a human before it runs write_file")
            expect(via).to_contain_text(HTML)
            assert via.locator("img").count() == 0 and page.evaluate("window.pwned === undefined")
            page.evaluate("document.activeElement.blur()")
            via.scroll_into_view_if_needed()
            via.screenshot(path=shots / f"via-remote-{width}.png")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), f"scrolls sideways at {width} px"

        button(via, "Approve").click()

        expect(via).to_have_attribute("data-status", "succeeded")  # passed on to docs__ask, which sends it there
        # Sent there, run by the remote's worker, its model's answer read back here: across both stacks.
        expect(page.locator(f'article[data-tool="docs__ask"]')).to_have_attribute("data-status", "succeeded", timeout=ACROSS_MS)
        expect(status_bar(page)).to_have_attribute("data-status", "idle")
        inner_approval.refresh_from_db()
        remote_conversation = inner()
        assert (inner_approval.status, inner_approval.decided_via, inner_approval.decided_by.username) == ("approved", "a2a", "outer-robot")
        assert (remote_stack.sandbox_root / str(remote_conversation.pk) / "notes.txt").read_text() == HTML
        assert ToolCall.objects.filter(message__conversation=remote_conversation, name="write_file", status=Status.SUCCEEDED).count() == 1
        child.refresh_from_db()
        assert (child.status, child.decided_by.username, child.decided_via) == ("approved", "alice", "chat")
        assert "I did write notes.txt" in outer_call(conversation_id).result


def test_stop_in_our_chat_cancels_the_remote_task(alice, api_for, docs, remote_stack):
    api = api_for(alice)
    conversation_id = ask_docs(api, "write hello to notes.txt")
    with told_on_failure(conversation_id, []):
        relayed(conversation_id)
        remote_conversation = inner()

        assert api.post(f"conversations/{conversation_id}/stop").status_code == 200

        cancelled = Approval.objects.filter(conversation=remote_conversation, status=Approval.Status.CANCELLED, decided_via=Approval.Via.A2A)
        wait_until(cancelled.exists, timeout=ACROSS_MS / 1000, message="the remote's pending call cancelled over A2A")
        task = Task.objects.get(conversation=remote_conversation)
        assert task.canceled
        assert outer_call(conversation_id).status == Status.CANCELLED
        assert not (remote_stack.sandbox_root / str(remote_conversation.pk) / "notes.txt").exists()
        assert task.conversation.status == Conversation.Status.IDLE


def test_a_remote_that_is_down_is_a_clear_error_and_our_conversation_goes_on(alice, api_for, docs):
    docs.card_url = f"http://127.0.0.1:{free_port()}/a2a/docs/.well-known/agent-card.json"
    docs.save()

    conversation_id = ask_docs(api_for(alice), "write hello to notes.txt")

    with told_on_failure(conversation_id, []):
        wait_for_status(conversation_id, Conversation.Status.IDLE)
        call = outer_call(conversation_id)
        assert (call.status, call.error) == (Status.FAILED, "docs could not be reached (ConnectError). Nothing was done here.")
        assert not Conversation.objects.filter(agent__slug="docs").exists()
