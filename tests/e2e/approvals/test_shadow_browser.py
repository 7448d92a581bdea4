"""Shadow rules and the oversight figures in Chromium on the real stack (issue 40, items 2, 3 and 5):
an approver's shadow rule counts the call it would have allowed; the rules page shows it, with the
call linked, and Promote to live makes it decide the next call; a rule with memory shows what it
remembers; the analytics page says who decided. With HITL_SHOTS=<dir>, saved at 1280 and 390 px."""
import pytest
from playwright.sync_api import expect

from approvals.models import Rule
from approvals.permissions import approvers_group
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    decide,
    logged_in,
    new_page,
    shoot,
    start,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e


def test_a_shadow_rule_counts_on_its_page_and_is_promoted_in_one_click(new_page, alice, bob, agent, api_for, e2e):
    bob.groups.add(approvers_group())
    made = api_for(bob).post("rules", {
        "effect": "allow", "tool": "write_file", "arguments": {"path": "notes/*"}, "scope": "global", "mode": "shadow",
        "note": "notes are fine",
    })
    assert made.status_code == 201, made.text
    remembering = api_for(bob).post("rules", {
        "effect": "allow", "tool": "send_email", "scope": "global", "at_most": {"count": 3, "within_seconds": 3600},
        "after": {"tool": "read_file", "same": [], "within_seconds": 600},
    })
    assert remembering.status_code == 201, remembering.text
    rule = made.json()["id"]
    api = api_for(alice)
    conversation_id = start(api, "write hello to notes/a.txt")
    [asked] = wait_for_pending(conversation_id, 1)  # the shadow rule decided nothing
    decide(api, asked)
    wait_for_status(conversation_id, "idle")

    page = logged_in(new_page, bob)
    page.goto("/rules/")
    row = page.locator(f"#rule-{rule}")
    expect(row.locator(".badge-shadow")).to_have_text("◌ shadow")
    expect(row.locator(".would-have")).to_contain_text("Would have: 1 allowed · 0 denied · 0 asked; 1 call decided otherwise")
    row.locator(".changed-calls summary").click()
    expect(row.locator(".changed-calls a")).to_have_attribute("href", f"/conversations/{conversation_id}/#tool-call-{asked.tool_call_id}")
    expect(page.locator(f"#rule-{remembering.json()['id']} .rule-memory").first).to_contain_text("only after read_file succeeded")
    shoot(page, "shadow-rules", "main")

    button(row, "Promote to live").click()
    expect(page.locator("#rules-status")).to_contain_text(f"Rule #{rule} is live")
    expect(row.locator(".badge-shadow")).to_have_count(0)
    expect(row.locator(".would-have")).to_contain_text("In the shadow, would have: 1 allowed")
    assert Rule.objects.get(pk=rule).mode == "live"

    second = start(api, "write more to notes/b.txt")
    wait_for_status(second, "idle")  # the rule, live, allowed it
    page.goto("/approvals/analytics/?days=7")
    expect(page.locator("#oversight")).to_contain_text("Who decided")
    expect(page.locator("#oversight tbody tr").first).to_contain_text("write_file")
    shoot(page, "oversight", "#oversight")
