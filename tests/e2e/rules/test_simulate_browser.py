"""The rule simulator in Chromium, against the real stack (issue 28): alice, whose agent just asked
her about two files, simulates an allow rule on the rules page, sees what it would have done (one
call allowed, the other outside its conditions), follows a sample to that call in its conversation,
and saves the rule only then; nothing was made by the simulation, and axe finds no serious violation."""
import pytest
from playwright.sync_api import expect

from approvals.models import Rule
from tests.conftest import wait_until
from tests.e2e.browser import TIMEOUT_MS, browser, log_in, new_page, page, start, wait_for_pending  # noqa: F401  (fixtures)
from tests.e2e.approvals.test_a11y_browser import assert_accessible

pytestmark = pytest.mark.e2e


def test_alice_simulates_a_rule_follows_a_sample_then_saves_it(e2e, page, alice, agent, api_for):
    api = api_for(alice)
    notes = start(api, "write hi to notes/a.txt")
    [approval] = wait_for_pending(notes, 1)
    other = start(api, "write hi to drafts/b.txt")
    wait_for_pending(other, 1)

    log_in(page, alice)
    page.goto("/rules/")
    page.locator("#new-rule > summary").click()
    form = page.locator(".rule-form")
    expect(form.get_by_label("Effect")).to_contain_text("Ask a human")
    form.get_by_label("Tool").fill("write_file")
    form.get_by_label("Conditions").fill("path = notes/*")
    form.get_by_label("Scope").select_option("agent_user")
    expect(form.get_by_label("Conversation")).to_be_hidden()  # the scope names an agent, not a conversation
    form.get_by_label("Agent").select_option(agent.slug)
    page.evaluate("window.sameDocument = true")  # gone if Simulate reloads the page
    form.get_by_role("button", name="Simulate").click()

    simulation = page.locator("#simulation")
    expect(simulation.locator('[data-count="allow"]')).to_have_text("1")
    expect(simulation.locator('[data-count="deny"]')).to_have_text("0")
    expect(simulation.locator('[data-count="ask"]')).to_have_text("0")
    expect(simulation).to_contain_text("Nothing was saved")
    assert page.evaluate("window.sameDocument") is True and not Rule.objects.exists()
    assert_accessible(page, "the rules page with a simulation")

    changed = page.locator(".rule-form")
    changed.get_by_label("Effect").select_option("ask")  # a change drops the simulation it no longer matches
    expect(simulation.get_by_role("button", name="Save this rule")).to_have_count(0)
    changed.get_by_label("Effect").select_option("allow")
    changed.get_by_role("button", name="Simulate").click()
    sample = page.locator("#simulation .simulation-samples a", has_text=f"approval #{approval.pk}")
    expect(sample).to_be_visible()

    sample.click()
    expect(page).to_have_url(f"{e2e.base_url}/conversations/{notes}/#tool-call-{approval.tool_call_id}")
    expect(page.locator(f"#tool-call-{approval.tool_call_id}")).to_contain_text("notes/a.txt")

    page.go_back()
    page.goto("/rules/")
    page.locator("#new-rule > summary").click()
    form = page.locator(".rule-form")
    form.get_by_label("Tool").fill("write_file")
    form.get_by_label("Conditions").fill("path = notes/*")
    form.get_by_label("Scope").select_option("agent_user")
    form.get_by_label("Agent").select_option(agent.slug)
    form.get_by_role("button", name="Simulate").click()
    page.locator("#simulation").get_by_role("button", name="Save this rule").click()
    expect(page.locator("#rules-status")).to_contain_text("saved")
    rule = wait_until(lambda: Rule.objects.first(), timeout=TIMEOUT_MS / 1000, message="the rule to be saved")
    assert (rule.effect, rule.tool, rule.arguments, rule.scope, rule.agent_id, rule.uses) == (
        "allow", "write_file", {"path": "notes/*"}, "agent_user", agent.pk, 0,
    )
    expect(page.locator(f"#rule-{rule.pk}")).to_contain_text("path is notes/*")
