"""Approval requests from an outside agent in Chromium, against the real stack: a request made with
the JSON API shows up live on its open conversation page and on the dashboard, an approver approves
it there, and the outcome the agent reports shows on the open page without a reload."""
import pytest
from playwright.sync_api import expect

from approvals.models import Approval, Outcome
from chat.demo import ensure_outside_agent
from chat.models import ToolCall
from tests.e2e.browser import (  # noqa: F401  (browser and new_page are fixtures)
    browser,
    button,
    new_page,
    open_conversation,
    row,
    status_bar,
)
from tests.e2e.browser import logged_in, open_dashboard, opened, still_same_document

pytestmark = pytest.mark.e2e


def ask(api, **fields) -> dict:
    body = {"agent": "outside", "tool": "deploy", "arguments": {"service": "web"}, "thread": "ticket-42"} | fields
    response = api.post("approval-requests", body)
    assert response.status_code == 201, response.text
    return response.json()


def test_a_request_shows_live_is_approved_in_the_browser_and_its_reported_outcome_follows(e2e, new_page, alice, bob, api_for):
    ensure_outside_agent()
    agent_api = api_for(alice)
    first = ask(agent_api)
    alices = logged_in(new_page, alice)
    open_conversation(alices, first["conversation"])
    alices.evaluate("window.sameDocument = true")
    expect(alices.locator("#composer")).to_have_count(0)
    expect(alices.locator(".outside-origin")).to_contain_text("Approval requests from an outside agent, through the JSON API · thread ticket-42")
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)

    second = ask(agent_api, arguments={"service": "db"}, reason="Migrate the schema")

    approval = Approval.objects.get(pk=second["id"])
    seen_by_alice = alices.locator(f"#tool-call-{approval.tool_call_id}")
    expect(seen_by_alice).to_have_attribute("data-status", "pending_approval")
    expect(seen_by_alice).to_contain_text("Pending approval")
    listed = row(bobs, approval)
    expect(listed).to_contain_text("deploy")
    expect(listed.locator(".source-api")).to_have_text("From an outside agent, via the API")
    button(opened(listed), "Approve").click()

    expect(seen_by_alice).to_have_attribute("data-status", "approved")
    expect(seen_by_alice).to_contain_text("Approved · awaiting the agent’s report")
    expect(seen_by_alice).to_contain_text("Outcome unknown")
    expect(seen_by_alice).to_contain_text("Approved by bob via dashboard")
    decided = agent_api.get(f"approvals/{second['id']}").json()
    reported = agent_api.post(
        f"approvals/{second['id']}/outcome", {"status": "succeeded", "result": "migrated 3 tables", "shown_hash": decided["shown_hash"]}
    )
    assert reported.status_code == 200, reported.text

    expect(seen_by_alice).to_have_attribute("data-status", "succeeded")
    expect(seen_by_alice.locator(".badge")).to_have_text("✓ Succeeded · as reported")
    expect(seen_by_alice).to_contain_text("Reported succeeded by alice")
    expect(seen_by_alice).not_to_contain_text("Outcome unknown")
    seen_by_alice.get_by_text("Result", exact=True).click()
    expect(seen_by_alice.locator(".result pre")).to_have_text("migrated 3 tables")
    assert still_same_document(alices)
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED
    assert Outcome.objects.get(approval=approval).reported_by == alice

    # The first request still waits: the status bar offers Stop, which cancels it, and then hides.
    stop = button(status_bar(alices), "■ Stop")
    expect(status_bar(alices)).to_contain_text("Waiting for a decision.")
    stop.click()
    expect(alices.locator(f"#tool-call-{Approval.objects.get(pk=first['id']).tool_call_id}")).to_have_attribute("data-status", "cancelled")
    expect(stop).to_be_hidden()
    expect(status_bar(alices)).to_contain_text("Nothing waits for a decision.")
    assert Approval.objects.get(pk=first["id"]).status == Approval.Status.CANCELLED
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED  # the reported call stays as reported
