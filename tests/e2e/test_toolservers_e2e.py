"""MCP tool servers end to end: the API on daphne, the loop in a real Celery worker calling real MCP
servers: our notes server over stdio and over streamable HTTP, and the reference mcp-server-git
over stdio."""
import subprocess
import time

import pytest

from chat.models import ToolCall
from tests.e2e.test_api_e2e import last_reply, start, wait_for_pending, wait_for_status
from tests.notes_server import notes_over_http
from toolservers import discovery
from toolservers.demo import ensure_git_server, ensure_notes_server
from toolservers.models import ToolServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def notes(e2e, agent, tmp_path):
    server = ensure_notes_server(agent, notes_dir=tmp_path / "notes")
    discovery.refresh(server)
    return tmp_path / "notes"


def call_of(conversation_id: str, name: str) -> ToolCall:
    return ToolCall.objects.filter(message__conversation_id=conversation_id, name=name).latest("pk")


def test_notes_over_stdio_read_freely_write_once_approved_delete_rejected(e2e, api_for, alice, agent, notes):
    api = api_for(alice)
    listed = start(api, "list my notes")
    wait_for_status(listed, "idle", timeout=30)
    assert call_of(listed, "notes__list_notes").result == "No notes."

    written = start(api, "note e2e as a.txt")
    [approval] = wait_for_pending(api, written, 1)
    assert approval["tool_call"]["name"] == "notes__write_note"
    assert approval["annotations"] == {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": False}
    assert not (notes / "a.txt").exists()
    assert api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"}).status_code == 200
    wait_for_status(written, "idle", timeout=30)
    assert (notes / "a.txt").read_text() == "e2e"
    assert last_reply(written) == "I did write note a.txt: Wrote 3 bytes to a.txt."

    removed = start(api, "remove note a.txt")
    [approval] = wait_for_pending(api, removed, 1)
    api.post(f"approvals/{approval['id']}/decision", {"decision": "reject", "reason": "keep it"})
    wait_for_status(removed, "idle", timeout=30)
    assert (notes / "a.txt").exists()
    assert last_reply(removed) == "I did not remove note a.txt (Rejected by alice: keep it)."


def test_a_tool_error_and_a_server_that_is_down_are_told_and_the_worker_goes_on(e2e, api_for, alice, agent, notes):
    api = api_for(alice)
    broken = start(api, "break the notes")
    wait_for_status(broken, "idle", timeout=30)
    assert last_reply(broken) == "I could not break the notes: Error executing tool fail: broken on purpose"

    ToolServer.objects.filter(name="notes").update(command="/nonexistent/mcp-server")
    down = start(api, "list my notes")
    wait_for_status(down, "idle", timeout=30)
    assert call_of(down, "notes__list_notes").error.startswith("The tool server notes is not reachable (FileNotFoundError")
    after = start(api, "what is 2 + 2")
    wait_for_status(after, "idle", timeout=30)
    assert last_reply(after) == "I did calculate 2 + 2: 2 + 2 = 4"


def test_notes_over_streamable_http(e2e, api_for, alice, agent, notes):
    with notes_over_http(notes) as url:
        ToolServer.objects.filter(name="notes").update(transport="http", url=url, command="", args=[])
        api = api_for(alice)
        written = start(api, "note over http as h.txt")
        [approval] = wait_for_pending(api, written, 1)
        api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})
        wait_for_status(written, "idle", timeout=30)
        assert (notes / "h.txt").read_text() == "over http"


def test_the_reference_git_server_commits_once_approved(e2e, api_for, alice, agent, tmp_path):
    repository = tmp_path / "repo"
    discovery.refresh(ensure_git_server(agent, repository=repository))
    api = api_for(alice)
    status = start(api, "git status")
    wait_for_status(status, "idle", timeout=30)
    assert call_of(status, "git__git_status").status == "succeeded"

    committed = start(api, "commit all with message From the worker")
    [approval] = wait_for_pending(api, committed, 1)
    assert approval["tool_call"]["name"] == "git__git_commit" and approval["preview"]["kind"] == "diff"
    assert call_of(committed, "git__git_add").status == "succeeded"
    api.post(f"approvals/{approval['id']}/decision", {"decision": "approve"})
    wait_for_status(committed, "idle", timeout=30)
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repository, capture_output=True, text=True, check=True).stdout
    assert log == "From the worker\nFirst commit\n"


def test_an_input_request_whose_state_expired_is_told_to_the_user_and_the_model(e2e, api_for, alice, agent, notes):
    ToolServer.objects.filter(name="notes").update(env={"NOTES_DIR": str(notes), "NOTES_STATE_TTL": "1"})
    api = api_for(alice)
    conversation_id = start(api, "title note late.txt")
    [gate] = wait_for_pending(api, conversation_id, 1)
    api.post(f"approvals/{gate['id']}/decision", {"decision": "approve"})
    [question] = wait_for_pending(api, conversation_id, 1)
    assert question["kind"] == "question" and question["question"]["text"].startswith("notes asks: Which title")
    time.sleep(1.5)  # the server's request state lives 1 s: this answer comes after it
    assert api.post(f"approvals/{question['id']}/answer", {"answer": "Too late"}).status_code == 200
    wait_for_status(conversation_id, "idle", timeout=30)
    assert last_reply(conversation_id).startswith("I could not title note late.txt: The answer came too late: notes no longer takes")
    assert not (notes / "late.txt").exists()
