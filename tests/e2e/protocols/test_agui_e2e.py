"""Agents over AG-UI end to end: the tests' own server-sent-events reader (httpx streaming) against
daphne, the loop in a real Celery worker, the run following the conversation over Redis; decisions
through the same service as the chat; and the example page (clients/agui-example/, the vendored
@ag-ui/client) in Chromium on the signed-in session. Asserted on stored state."""
import json
import uuid

import httpx
import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from chat.models import ApiToken, Conversation, ToolCall
from tests.e2e.browser import browser, log_in, new_page  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e


class AgUi:
    """An AG-UI client of one user: POSTs a RunAgentInput and reads the event stream line by line."""

    def __init__(self, base_url: str, token: str | None, slug: str = "demo"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=httpx.Timeout(30, read=30))
        self.path = f"/agui/{slug}/"

    def run(self, thread: str, *, text: str | None = None, resume: list | None = None) -> list[dict]:
        body = {"threadId": thread, "runId": str(uuid.uuid4()), "messages": [], "state": {}, "tools": [], "context": []}
        if text is not None:
            body["messages"] = [{"id": str(uuid.uuid4()), "role": "user", "content": text}]
        if resume is not None:
            body["resume"] = resume
        events, data = [], []
        with self.http.stream("POST", self.path, json=body, headers={"Accept": "text/event-stream"}) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data.append(line.removeprefix("data:").strip())
                elif not line and data:
                    events.append(json.loads("\n".join(data)))
                    data = []
                    if events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                        break
        return events

    def post(self, body) -> httpx.Response:
        return self.http.post(self.path, json=body)


@pytest.fixture
def agui(e2e):
    clients = []

    def make(user, **kwargs) -> AgUi:
        clients.append(AgUi(e2e.base_url, ApiToken.issue(user) if user else None, **kwargs))
        return clients[-1]

    yield make
    for client in clients:
        client.http.close()


def outcome(events: list[dict]) -> dict:
    assert events[0]["type"] == "RUN_STARTED", events
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    return events[-1]["outcome"]


def resolved(interrupt: dict, **payload) -> list[dict]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


def said(events: list[dict]) -> str:
    return " ".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_message_pauses_at_an_interrupt_and_a_resume_approves_it_and_the_run_ends_in_success(e2e, agui, alice, agent):
    client = agui(alice)

    paused = client.run("files", text="write hello to a.txt")

    [interrupt] = outcome(paused)["interrupts"]
    approval = Approval.objects.get(pk=int(interrupt["id"]))
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_approval", approval.tool_call.call_id)
    assert interrupt["responseSchema"]["properties"]["decision"] == {"enum": ["approve", "reject"]}
    assert "TOOL_CALL_START" in [e["type"] for e in paused]
    conversation = Conversation.objects.get(owner=alice, external_thread="files")
    assert not (e2e.sandbox_root / str(conversation.pk) / "a.txt").exists()

    done = client.run("files", resume=resolved(interrupt, decision="approve"))

    assert outcome(done) == {"type": "success"}
    [result] = [e for e in done if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == interrupt["toolCallId"] and result["content"] == "Wrote 5 bytes to a.txt."
    assert said(done) == "I did write a.txt: Wrote 5 bytes to a.txt."
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "agui", alice)
    assert (e2e.sandbox_root / str(conversation.pk) / "a.txt").read_text() == "hello"
    assert ToolCall.objects.filter(name="write_file", status="succeeded").count() == 1

    again = client.run("files", resume=resolved(interrupt, decision="approve"))  # a replayed resume

    assert [e["type"] for e in again] == ["RUN_STARTED", "RUN_ERROR"]
    assert again[-1]["message"] == f"Interrupt {interrupt['id']} was already approved by alice via agui."
    assert ToolCall.objects.filter(name="write_file", status="succeeded").count() == 1  # written once


def test_a_question_is_answered_and_an_edit_approved_through_resume(e2e, agui, alice, agent):
    client = agui(alice)
    [question] = outcome(client.run("chores", text="ask me to choose between tea, coffee and water"))["interrupts"]
    assert (question["reason"], question["responseSchema"]["properties"]["answer"]) == ("question", {"enum": ["tea", "coffee", "water"]})

    answered = client.run("chores", resume=resolved(question, answer="coffee"))

    assert outcome(answered) == {"type": "success"} and "You answered: coffee." in said(answered)
    assert Approval.objects.get(pk=int(question["id"])).answer == "coffee"

    [write] = outcome(client.run("chores", text="write hello to b.txt"))["interrupts"]
    edited = client.run("chores", resume=resolved(write, decision="approve", editedArgs={"path": "b.txt", "content": "edited"},
                                                  shownHash=write["metadata"]["shownHash"]))

    assert outcome(edited) == {"type": "success"}
    approval = Approval.objects.get(pk=int(write["id"]))
    assert (approval.status, approval.decided_via, approval.edited_arguments["content"]) == ("approved", "agui", "edited")
    assert (e2e.sandbox_root / str(approval.conversation_id) / "b.txt").read_text() == "edited"


def test_no_token_is_401_and_another_users_thread_and_interrupt_are_refused(e2e, agui, alice, mallory, agent):
    body = {"threadId": "files", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "write x to a.txt"}]}
    response = agui(None).post(body)
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"

    [interrupt] = outcome(agui(alice).run("files", text="write hello to a.txt"))["interrupts"]
    mallorys = agui(mallory)
    conversation = Conversation.objects.get(owner=alice, external_thread="files")

    for thread in ("files", str(conversation.pk)):  # alice's thread id, and her conversation's id
        refused = mallorys.run(thread, resume=resolved(interrupt, decision="approve"))
        assert refused[-1]["type"] == "RUN_ERROR" and refused[-1]["code"] == "unknown_thread"
    assert outcome(mallorys.run("files", text="what is 2 + 2")) == {"type": "success"}  # a thread of her own
    refused = mallorys.run("files", resume=resolved(interrupt, decision="approve"))
    assert refused[-1]["code"] == "unknown_interrupt"

    assert Approval.objects.get(pk=int(interrupt["id"])).status == "pending"
    assert Conversation.objects.filter(external_thread="files").count() == 2


HTML = '<img src=x onerror="window.pwned=1"><b>bold</b>'


def test_the_example_page_runs_on_the_signed_in_session_and_approves_from_its_card(e2e, new_page, alice, agent):
    """...and shows what the agent sends (the message, the arguments, the preview) as text, never as HTML."""
    page = new_page(width=1280, height=900)
    log_in(page, alice)
    response = page.goto("/agui/example/")
    assert "script-src 'self'" in response.headers["content-security-policy"]

    page.get_by_placeholder("Message the agent").fill(f"write {HTML} to a.txt")
    page.get_by_role("button", name="Send").click()
    card = page.locator(".card", has_text="write_file")
    expect(card).to_contain_text("tool approval")
    expect(card.locator("pre.preview")).to_contain_text(HTML)
    assert json.loads(card.locator("textarea").input_value())["content"] == HTML
    expect(page.locator("#log")).to_contain_text(HTML)
    card.get_by_role("button", name="Approve").click()

    expect(page.locator("#status")).to_have_text("Done.")
    expect(page.locator("#log")).to_contain_text(f"I did write a.txt: Wrote {len(HTML)} bytes to a.txt.")
    assert page.evaluate("window.pwned") is None
    assert page.locator("main img, main b").count() == 0
    approval = Approval.objects.get(conversation__owner=alice)
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "agui", alice)
    assert (e2e.sandbox_root / str(approval.conversation_id) / "a.txt").read_text() == HTML
