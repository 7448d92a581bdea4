"""Expiry on the card, in Chromium on the real stack (issue 35, item 7): a short wait is warned at
once ("Expires in …" with Extend, pushed by beat's sweep), Extend pushes the deadline back once,
a late decision is shown on the expired card, which asks again, and the new card is approved and runs, the model not asked again.
With HITL_SHOTS=<dir>, the card's states are also saved there at 1280 and 390 px."""
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from chat.models import Conversation, ToolCall
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    card,
    log_in,
    new_page,
    open_conversation,
    page,
    shoot,
    start,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e

WAIT_SECONDS = 10  # the agent's approval timeout: under a minute, so each wait is warned at once


def test_the_card_warns_extends_and_an_expired_card_is_asked_again_and_runs(page, alice, agent, api_for, e2e):
    agent.approval_timeout_seconds = WAIT_SECONDS
    agent.save(update_fields=["approval_timeout_seconds"])
    api = api_for(alice)
    conversation_id = start(api, "write hi to notes.txt")
    [first] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    old = card(page, "write_file")

    expect(old.locator(".expiring")).to_contain_text("Expires in under a minute (at ")
    shoot(page, "card-warning")
    button(old, "Extend").click()
    expect(old.locator(".extended")).to_contain_text("Extended once by alice")
    extended = Approval.objects.get(pk=first.pk)
    assert extended.extended_by == alice and extended.expires_at > first.expires_at
    expect(old.locator(".expiring")).to_be_visible()  # the new deadline is warned of too (beat's sweep, pushed)
    expect(button(old, "Extend")).to_have_count(0)  # once
    shoot(page, "card-extended")

    expect(old.locator(".decided-expired")).to_contain_text("Expired", timeout=3 * WAIT_SECONDS * 1000)
    wait_for_status(conversation_id, Conversation.Status.IDLE)  # the model was told it timed out, and answered
    told = Conversation.objects.get(pk=conversation_id).messages.count()
    late = api.post(f"approvals/{first.pk}/decision", {"decision": "approve", "shown_hash": first.shown_hash})
    assert late.status_code == 409 and "expired" in late.json()["detail"]
    page.reload()
    expect(old.locator(".late-decision")).to_contain_text("alice tried to approve at ")
    shoot(page, "card-expired")

    agent.approval_timeout_seconds = 60  # what the policy says now is the new wait: time to approve on a busy machine
    agent.save(update_fields=["approval_timeout_seconds"])
    button(old, "Ask again").click()
    expect(old.locator(".asked-again")).to_contain_text("Asked again as approval #")
    again = Approval.objects.get(asked_again_from=first)
    new = page.locator(f"#tool-call-{again.tool_call_id}")
    expect(new.locator(".asked-again-from")).to_contain_text(f"the same call as approval #{first.pk}")
    assert again.shown_hash == first.shown_hash and again.expires_at == again.requested_at + timedelta(seconds=60)
    shoot(page, "card-asked-again")
    button(new, "Approve").click()

    wait_for_status(conversation_id, Conversation.Status.IDLE)
    expect(new).to_have_attribute("data-status", "succeeded")
    assert ToolCall.objects.get(pk=again.tool_call_id).status == ToolCall.Status.SUCCEEDED
    assert (e2e.sandbox_root / conversation_id / "notes.txt").read_text() == "hi"
    # One new turn (the asked-again call) and one answer to its result: the model was not asked for the call again.
    assert Conversation.objects.get(pk=conversation_id).messages.count() == told + 2
