"""The rules page in Chromium, against the real stack: alice finds a rule she made, disables it and
deletes it with htmx (the page is never reloaded), and the database agrees at each step."""
import pytest
from playwright.sync_api import expect

from approvals.policy import rulemaking
from approvals.models import Rule
from tests.conftest import wait_until
from tests.e2e.browser import TIMEOUT_MS, browser, button, log_in, new_page, page  # noqa: F401  (browser, new_page and page are fixtures)

pytestmark = pytest.mark.e2e


def stored(rule: Rule) -> Rule:
    return Rule.objects.get(pk=rule.pk)


def test_alice_disables_then_deletes_her_rule_on_the_rules_page(e2e, page, alice, agent):
    rule = rulemaking.create(
        alice, effect="allow", tool="write_file", arguments={"path": "notes/*"}, scope=Rule.Scope.AGENT_USER,
        agent=agent.slug, note="notes are mine",
    )
    log_in(page, alice)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Rules").click()
    expect(page).to_have_title("Rules · hitl")
    page.evaluate("window.sameDocument = true")  # gone if a click reloads the page

    row = page.locator(f"#rule-{rule.pk}")
    expect(row).to_contain_text("write_file")
    expect(row).to_contain_text("path is notes/*")
    expect(row).to_contain_text("notes are mine")
    expect(row).to_contain_text("enabled")

    button(row, "Disable").click()
    expect(row).to_have_attribute("data-enabled", "false")
    expect(row.locator(".rule-state")).to_have_text("disabled")
    expect(button(row, "Enable")).to_be_visible()
    wait_until(lambda: not stored(rule).enabled, timeout=TIMEOUT_MS / 1000, message="the rule to be disabled")

    delete = button(row, f"Delete rule #{rule.pk}")
    expect(delete).to_be_hidden()  # behind the confirmation step
    row.get_by_text("Delete…").click()
    delete.click()
    expect(row).to_have_count(0)
    removed = wait_until(lambda: stored(rule).deleted_at, timeout=TIMEOUT_MS / 1000, message="the rule to be removed")
    assert removed and not stored(rule).enabled
    assert page.evaluate("window.sameDocument") is True

    page.reload()
    expect(page.locator(f"#rule-{rule.pk}")).to_have_count(0)
    expect(page.locator("#no-rules")).to_contain_text("Always…")
