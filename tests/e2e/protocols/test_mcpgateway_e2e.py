"""The MCP gateway end to end: the `mcp` SDK's own Client over streamable HTTP (its bearer token in
the header) calls the demo agent's tools at /mcp/demo/ on daphne, in front of the reference
mcp-server-git (run by daphne's gateway threads once a call may run). An ungated git_status returns
at once; a gated commit waits (progress notifications meanwhile), is listed pending in the JSON API
under its tool's name, and returns the commit's result once approved there, or in Chromium on the
dashboard; a rejection returns isError with the reason; a daphne restarted during the wait loses
nothing (the client's call fails clearly, the approval survives, the same call again joins it)."""
import asyncio
import subprocess
import threading
from concurrent.futures import Future

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from playwright.sync_api import expect

from approvals.models import Approval
from chat.models import ApiToken, ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import browser, button, logged_in, new_page, open_dashboard, opened  # noqa: F401  (fixtures)
from tests.e2e.conftest import BIN, free_port, port_open, start
from toolservers import discovery
from toolservers.demo import ensure_git_server, ensure_notes_server

pytestmark = pytest.mark.e2e

COMMIT_TEXT = "Changes committed successfully"


@pytest.fixture
def repository(e2e, agent, tmp_path):
    """The reference git server on a repository with one uncommitted change, linked to the demo agent
    (commits need a human; status and staging run freely), its tools listed."""
    path = tmp_path / "repo"
    discovery.refresh(ensure_git_server(agent, repository=path))
    return path


def git_log(repository) -> str:
    return subprocess.run(["git", "log", "--format=%s"], cwd=repository, capture_output=True, text=True, check=True).stdout


class McpCaller:
    """The SDK's Client on the gateway, as an MCP client configured with the URL and a token would
    be; a call runs in a thread of its own (its own event loop) so the test can decide meanwhile."""

    def __init__(self, base_url: str, user, slug: str = "demo"):
        self.url, self.token = f"{base_url}/mcp/{slug}/", ApiToken.issue(user)
        self.progress: list[str] = []

    async def _with_client(self, work):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=httpx2.Timeout(30, read=120))
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            return await work(client)

    def list_tools(self) -> list[types.Tool]:
        async def work(client):
            return (await client.list_tools()).tools

        return self._in_thread(work).result(timeout=60)

    def call(self, name: str, arguments: dict) -> types.CallToolResult:
        return self.call_in_background(name, arguments).result(timeout=60)

    def call_in_background(self, name: str, arguments: dict) -> Future:
        async def on_progress(value, total, message):
            self.progress.append(message)

        async def work(client):
            return await client.call_tool(name, arguments, progress_callback=on_progress)

        return self._in_thread(work)

    def _in_thread(self, work) -> Future:
        """`work(client)` in a thread of its own, with its own event loop (never the test's thread,
        where Playwright's loop may be running)."""
        future: Future = Future()

        def run():
            try:
                future.set_result(asyncio.run(self._with_client(work)))
            except BaseException as exc:  # noqa: BLE001  (handed to the test through the future)
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True).start()
        return future


def text_of(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


def pending_listed(api, tool: str) -> dict:
    """The one approval the JSON API lists as pending for `tool`, once it is there."""

    def listed():
        items = [a for a in api.get("approvals", status="pending").json()["items"] if a["tool_call"]["name"] == tool]
        return items[0] if len(items) == 1 else None

    return wait_until(listed, timeout=30, message=f"a pending approval of {tool}")


def stage(caller: McpCaller, repository) -> None:
    staged = caller.call("git__git_add", {"repo_path": str(repository), "files": ["README.md"]})
    assert staged.is_error is False, text_of(staged)


def test_tools_list_and_an_ungated_git_status_returns_at_once(e2e, alice, repository):
    caller = McpCaller(e2e.base_url, alice)

    names = {tool.name: tool for tool in caller.list_tools()}
    result = caller.call("git__git_status", {"repo_path": str(repository)})

    assert {"git__git_status", "git__git_commit", "calculator", "write_file"} <= set(names)
    assert names["git__git_status"].input_schema["required"] == ["repo_path"]
    assert names["git__git_status"].annotations is not None
    assert result.is_error is False and "modified:   README.md" in text_of(result)
    call = ToolCall.objects.get(name="git__git_status")
    assert (call.status, call.is_gated, call.message.conversation.source) == ("succeeded", False, "mcp")


def test_a_gated_commit_waits_for_the_api_decision_then_returns_the_commits_result(e2e, api_for, alice, repository):
    caller, api = McpCaller(e2e.base_url, alice), api_for(alice)
    stage(caller, repository)

    waiting = caller.call_in_background("git__git_commit", {"repo_path": str(repository), "message": "From MCP"})
    approval = pending_listed(api, "git__git_commit")
    wait_until(lambda: caller.progress, timeout=30, message="a progress notification while the call waits")
    assert not waiting.done() and git_log(repository) == "First commit\n"
    assert approval["preview"]["kind"] == "diff"
    assert api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"}).status_code == 200
    result = waiting.result(timeout=60)

    assert result.is_error is False and text_of(result).startswith(COMMIT_TEXT)
    assert git_log(repository) == "From MCP\nFirst commit\n"
    assert caller.progress[0] == f"Waiting for a human's decision on approval #{approval['id']} (git__git_commit)."
    stored = Approval.objects.select_related("tool_call").get(pk=approval["id"])
    assert (stored.status, stored.decided_via, stored.tool_call.status) == ("approved", "api", "succeeded")
    assert stored.tool_call.result.startswith(COMMIT_TEXT)


def test_a_rejected_commit_returns_is_error_with_who_rejected_it_and_why(e2e, api_for, alice, repository):
    caller, api = McpCaller(e2e.base_url, alice), api_for(alice)
    stage(caller, repository)

    waiting = caller.call_in_background("git__git_commit", {"repo_path": str(repository), "message": "Nope"})
    approval = pending_listed(api, "git__git_commit")
    api.post(f"approvals/{approval['id']}/decision", {"decision": "reject", "reason": "squash it first"})
    result = waiting.result(timeout=60)

    assert result.is_error is True
    assert text_of(result).startswith("git__git_commit was not run. Rejected by alice via api at ")
    assert text_of(result).endswith(": squash it first.")
    assert git_log(repository) == "First commit\n"
    assert ToolCall.objects.get(name="git__git_commit").status == "rejected"


@pytest.fixture
def own_daphne(e2e):
    """A daphne of this test's own beside the stack's (the same database, Redis and worker), so that
    restarting it disturbs nothing else."""
    port = free_port()
    args = [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"]
    processes = [start("mcp-web", args, e2e.env, e2e.work)]
    wait_until(lambda: port_open(port), timeout=30, message="the test's daphne")

    class Own:
        base_url = f"http://127.0.0.1:{port}"

        @staticmethod
        def restart() -> None:
            processes[-1].stop(timeout=10)
            # Exited by itself, its gated call's wait ended: not killed (a push caught in the shutdown
            # once kept a database thread, and with it the process, alive until SIGKILL).
            assert processes[-1].popen.returncode == 0, f"daphne did not exit on SIGTERM:\n{processes[-1].tail()}"
            processes.append(start(f"mcp-web-{len(processes)}", args, e2e.env, e2e.work))
            wait_until(lambda: port_open(port), timeout=30, message="the test's daphne back")

    yield Own
    processes[-1].stop()


def test_a_daphne_restarted_during_the_wait_loses_nothing_and_the_same_call_joins_the_approval(e2e, api_for, alice, repository, own_daphne):
    caller, api = McpCaller(own_daphne.base_url, alice), api_for(alice)
    stage(caller, repository)
    arguments = {"repo_path": str(repository), "message": "Through a restart"}

    waiting = caller.call_in_background("git__git_commit", arguments)
    approval = pending_listed(api, "git__git_commit")
    own_daphne.restart()
    with pytest.raises(Exception) as failed:  # the client's call ends with its connection: an error, never a result
        waiting.result(timeout=60)
    assert Approval.objects.get(pk=approval["id"]).status == "pending"  # the approval survived

    again = caller.call_in_background("git__git_commit", arguments)
    wait_until(lambda: len(caller.progress) >= 2, timeout=30, message="the second call waiting")
    assert api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"}).status_code == 200
    result = again.result(timeout=60)

    assert failed.value is not None
    assert result.is_error is False and text_of(result).startswith(COMMIT_TEXT)
    assert git_log(repository) == "Through a restart\nFirst commit\n"
    assert Approval.objects.count() == 1 and ToolCall.objects.filter(name="git__git_commit").count() == 1
    assert caller.progress[-1] == f"Waiting for a human's decision on approval #{approval['id']} (git__git_commit)."


def test_a_gated_commit_approved_on_the_dashboard_in_chromium_makes_the_call_return(e2e, new_page, api_for, alice, bob, repository):
    caller = McpCaller(e2e.base_url, alice)
    stage(caller, repository)

    waiting = caller.call_in_background("git__git_commit", {"repo_path": str(repository), "message": "From the dashboard"})
    approval = pending_listed(api_for(alice), "git__git_commit")
    page = logged_in(new_page, bob)
    open_dashboard(page)  # its socket open and the re-read that follows landed: no re-read closes the row clicked
    listed = page.locator(f"#approval-row-{approval['id']}")
    expect(listed).to_contain_text("git__git_commit")
    button(opened(listed), "Approve").click()
    result = waiting.result(timeout=60)

    assert result.is_error is False and text_of(result).startswith(COMMIT_TEXT)
    assert git_log(repository) == "From the dashboard\nFirst commit\n"
    stored = Approval.objects.select_related("decided_by").get(pk=approval["id"])
    assert (stored.status, stored.decided_by, stored.decided_via) == ("approved", bob, "dashboard")


def test_a_tool_that_asks_a_human_mid_call_puts_a_question_in_the_conversation_and_the_answer_finishes_the_call(e2e, api_for, alice, agent, tmp_path):
    notes = tmp_path / "notes"
    discovery.refresh(ensure_notes_server(agent, notes_dir=notes))
    caller, api = McpCaller(e2e.base_url, alice), api_for(alice)

    waiting = caller.call_in_background("notes__title_note", {"name": "a.txt"})
    gate = pending_listed(api, "notes__title_note")
    assert api.post(f"approvals/{gate['id']}/decision", {"decision": "approve"}).status_code == 200
    question = wait_until(lambda: Approval.objects.filter(kind="question", status="pending").first(), timeout=30, message="the server's question")
    assert question.question["text"].startswith("notes asks: Which title")
    wait_until(lambda: any("asked a question" in message for message in caller.progress), timeout=30, message="the client told of the question")
    assert not waiting.done()
    assert api.post(f"approvals/{question.pk}/answer", {"answer": "From MCP"}).status_code == 200
    result = waiting.result(timeout=60)

    assert (result.is_error, text_of(result)) == (False, "Titled a.txt: From MCP.")
    assert (notes / "a.txt").read_text() == "# From MCP\n"
    assert question.conversation.source == "mcp"
