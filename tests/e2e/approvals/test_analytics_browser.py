"""The analytics page in Chromium on the real stack: an approver finds it in the nav and sees the
tables, the chart and a rubber-stamp suspect flagged; another window is one click; a non-approver
gets 403 and no link; axe-core finds no serious violation at 1280 and 390 px."""
import re
from datetime import timedelta

import pytest
from playwright.sync_api import expect

from tests.e2e.browser import (  # noqa: F401  (browser and new_page are fixtures)
    browser,
    decide,
    log_in,
    new_page,
    start,
    wait_for_pending,
)
from tests.e2e.approvals.test_a11y_browser import assert_accessible
from tests.approvals.test_analytics import make_decided

pytestmark = pytest.mark.e2e


def test_an_approver_sees_the_figures_the_chart_and_a_rubber_stamp_suspect(new_page, alice, bob, carol, agent, api_for):
    # Two decisions through the real stack: bob approves one call and rejects the other.
    conversation_id = start(api_for(alice), "delete a.txt and b.txt")
    first, second = wait_for_pending(conversation_id, 2)
    decide(api_for(bob), first)
    decide(api_for(bob), second, "reject", "not b.txt")
    # carol's twenty approvals, under a second each, written as rows: twenty real decisions timed
    # under 3 s would measure this machine's load, not the page.
    make_decided(alice, agent, [0.8] * 20, by=carol, ago=timedelta(0))

    page = new_page(width=1280, height=900)
    log_in(page, carol)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Analytics").click()

    expect(page.get_by_role("heading", name="How approvals are decided")).to_be_visible()
    expect(page.locator("#suspect-carol")).to_contain_text("carol: 20 decisions, 100 % approved, median 0.8 s")
    expect(page.locator("#suspect-carol")).to_contain_text("carol: 20 decisions, 100 % approved, median 0.8 s (a median under 2 s: faster than a call can be read)")
    expect(page.locator("#suspect-bob")).to_have_count(0)
    carol_row = page.locator("#by-approver tr", has_text="carol")
    expect(carol_row).to_contain_text("Rubber-stamp suspect")
    bob_cells = page.locator("#by-approver tr", has_text="bob").locator("td")
    for i, text in enumerate(["2", "1", "1", "50 %"]):  # decisions, approved, rejected, rate
        expect(bob_cells.nth(i)).to_have_text(text)
    expect(page.locator("#by-agent tr", has_text="demo").locator("td").first).to_have_text("22")
    expect(page.locator("#by-tool tr", has_text="delete_file").locator("td").first).to_have_text("22")
    chart = page.get_by_role("img", name="Pending and decided per day")
    expect(chart).to_be_visible()
    expect(chart.locator(".bars rect")).to_have_count(30)
    expect(page.locator(".chart-numbers tbody tr").last).to_contain_text("22")
    assert_accessible(page, "the analytics page with a suspect")

    page.get_by_role("link", name="7 days").click()
    expect(page).to_have_url(re.compile(r"/approvals/analytics/\?days=7$"))
    expect(page.get_by_role("link", name="7 days")).to_have_attribute("aria-current", "page")
    expect(chart.locator(".bars rect")).to_have_count(7)


def test_a_non_approver_gets_403_and_no_link(new_page, mallory):
    page = new_page(width=390, height=800)
    log_in(page, mallory)
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Analytics")).to_have_count(0)

    response = page.goto("/approvals/analytics/")

    assert response.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.get_by_text("Analytics are for approvers.")).to_be_visible()
