"""Approval requests from an outside agent in Chromium, against the real stack: a request made with
the JSON API shows up live on its open conversation page and on the dashboard, an approver approves
it there, and the outcome the agent reports shows on the open page without a reload."""
import asyncio
import threading

import pytest
from channels_redis.core import RedisChannelLayer
from playwright.sync_api import expect

from approvals.models import Approval, Outcome
from chat import fragments, loop
from chat.demo import ensure_outside_agent
from chat.models import ToolCall
from core import live
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
    seen_by_alice.locator("details.details-fold > summary").click()  # a decided card's one fold: its details
    expect(seen_by_alice.locator(".details-fold .fold-label", has_text="Result")).to_be_visible()
    expect(seen_by_alice.locator(".details-fold pre.result-text")).to_have_text("migrated 3 tables")
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


def test_a_push_rendered_before_the_outcome_never_takes_the_finished_card_back(e2e, new_page, alice, bob, api_for):
    """The request that decided a call and the one that reported its outcome both push its card; the
    decider's push may be delivered last. The page keeps the later stage (static/js/app.js)."""
    ensure_outside_agent()
    agent_api = api_for(alice)
    asked = ask(agent_api)
    alices = logged_in(new_page, alice)
    open_conversation(alices, asked["conversation"])
    decided = api_for(bob).post(f"approvals/{asked['id']}/decision", {"decision": "approve", "shown_hash": asked["shown_hash"]})
    assert decided.status_code == 200, decided.text
    approval = Approval.objects.select_related("tool_call").get(pk=asked["id"])
    stale = loop._loaded_call(approval.tool_call_id)
    stale.status = ToolCall.Status.APPROVED  # the card as the decider's request renders it (loop.show_decided)
    stale_card = fragments.tool_card_html(stale, oob=True)
    reported = agent_api.post(f"approvals/{asked['id']}/outcome", {"status": "succeeded", "result": "deployed", "shown_hash": decided.json()["shown_hash"]})
    assert reported.status_code == 200, reported.text
    card = alices.locator(f"#tool-call-{approval.tool_call_id}")
    expect(card).to_have_attribute("data-status", "succeeded")
    messages = int(alices.locator("html").get_attribute("data-ws-messages"))

    push_late(e2e.redis_url, live.conversation_group(approval.conversation_id), stale_card)

    expect(alices.locator("html")).to_have_attribute("data-ws-messages", str(messages + 1))  # the stale push arrived
    expect(card).to_have_attribute("data-status", "succeeded")
    expect(card.locator(".badge")).to_have_text("✓ Succeeded · as reported")


def push_late(redis_url: str, group: str, html: str) -> None:
    """A push as core.live sends one, onto the stack's Redis; from a thread of its own, since this
    test's thread runs Playwright's event loop."""
    layer = RedisChannelLayer(hosts=[redis_url])
    sending = threading.Thread(target=asyncio.run, args=(layer.group_send(group, {"type": "html.push", "html": html}),))
    sending.start()
    sending.join()
