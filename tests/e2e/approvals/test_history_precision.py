"""The history to the second (issue 38, item 6), in Chromium against the real stack: each row leads
with the call in words, says when it was requested and decided to the second with the zone, and on
a 390 px phone takes three lines at most, the rest behind its Details. Not a *_browser.py module:
CI runs it on PostgreSQL too, where times keep their microseconds."""
import re

import pytest
from playwright.sync_api import Locator, Page, expect

from approvals.models import Approval
from approvals.templatetags.approval_tags import call_title
from tests.e2e.approvals.test_a11y_browser import axe_violations, described
from tests.e2e.browser import browser, decide, logged_in, new_page, start, wait_for_pending  # noqa: F401  (browser, new_page: fixtures)

pytestmark = pytest.mark.e2e

TO_THE_SECOND = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")  # the stack's zone (settings.TIME_ZONE)
LONG_REASON = "keep b.txt: the quarterly report still reads it, and finance asked that every draft stay until the audit is over"

# The lines a row takes: the vertical bands its visible cells fill (cells side by side share one),
# each as many lines as its height holds of the cell's line height (a badge's padding is no line).
ROW_LINES = """(row) => {
  const boxes = [...row.children].filter((cell) => cell.getClientRects().length)
    .map((cell) => ({rect: cell.getBoundingClientRect(), line: parseFloat(getComputedStyle(cell).lineHeight)}))
    .sort((a, b) => a.rect.top - b.rect.top);
  const bands = [];
  for (const {rect, line} of boxes) {
    const band = bands[bands.length - 1];
    if (band && rect.top < band.bottom - 1) { band.bottom = Math.max(band.bottom, rect.bottom); band.line = Math.max(band.line, line); }
    else bands.push({top: rect.top, bottom: rect.bottom, line});
  }
  return bands.reduce((lines, band) => lines + Math.round((band.bottom - band.top) / band.line), 0);
}"""


def history_row(page: Page, approval: Approval) -> Locator:
    return page.locator(f"#history-{approval.pk}")


def shown(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


@pytest.fixture
def decided(alice, bob, agent, api_for):
    """Four of alice's calls decided by bob through the API: two deletes approved, one rejected with
    a reason too long for a phone's line, an email (a long sentence) approved."""
    api, bobs_api = api_for(alice), api_for(bob)
    delete_a, delete_b, delete_c = wait_for_pending(start(api, "delete a.txt, b.txt and c.txt"), 3)
    [email] = wait_for_pending(start(api, "email someone.with.a.long.address@example.com about the quarterly numbers"), 1)
    decide(bobs_api, delete_a)
    decide(bobs_api, delete_b, "reject", LONG_REASON)
    decide(bobs_api, delete_c)
    decide(bobs_api, email)
    return [Approval.objects.select_related("tool_call").get(pk=a.pk) for a in (delete_a, delete_b, delete_c, email)]


def test_history_rows_lead_with_the_call_in_words_and_give_times_to_the_second(new_page, bob, decided):
    delete_a, delete_b, _, email = decided
    page = logged_in(new_page, bob, width=1280, height=900)

    page.goto("/approvals/history/")

    expect(page.locator("table.history tbody tr")).to_have_count(4)
    for approval in decided:
        listed = history_row(page, approval)
        expect(listed.locator("td.call .call-title")).to_have_text(call_title(approval))
        expect(listed.locator("td.call code.tool-name")).to_have_text(approval.tool_call.name)  # secondary, after the words
        for cell, moment in (("decided-at", approval.decided_at), ("requested-at", approval.requested_at)):
            time = listed.locator(f"td.{cell} time")
            expect(time).to_have_text(TO_THE_SECOND)
            expect(time).to_have_text(shown(moment))
            assert time.get_attribute("datetime").startswith(f"{moment:%Y-%m-%dT%H:%M:%S}"), cell
    expect(history_row(page, delete_a).locator(".call-title")).to_have_text("Delete a.txt")
    expect(history_row(page, email).locator(".call-title")).to_contain_text("someone.with.a.long.address@example.com")
    expect(history_row(page, delete_b).locator("td.reason")).to_contain_text(LONG_REASON)
    assert page.locator("td.more").evaluate_all("cells => cells.every((cell) => !cell.getClientRects().length)")  # a phone's Details
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280


def test_a_phone_history_row_takes_three_lines_at_most_and_opens_to_the_rest(new_page, bob, decided):
    delete_a, delete_b, _, email = decided
    phone = logged_in(new_page, bob, width=390, height=844)

    phone.goto("/approvals/history/")

    rows = phone.locator("table.history tbody tr")
    expect(rows).to_have_count(4)
    for approval in decided:
        listed = history_row(phone, approval)
        expect(listed.locator(".call-title")).to_be_visible()
        expect(listed.locator("td.decided-at time")).to_have_text(shown(approval.decided_at))
        assert listed.evaluate(ROW_LINES) <= 3, f"#{approval.pk}: {listed.evaluate(ROW_LINES)} lines"
        assert listed.bounding_box()["height"] < 1.5 * history_row(phone, delete_a).bounding_box()["height"]
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    reason = history_row(phone, delete_b).locator("td.reason")
    expect(reason).to_be_visible()
    assert reason.evaluate("cell => cell.scrollWidth > cell.clientWidth")  # the long reason cut with "…", not wrapped
    expect(history_row(phone, email).locator("td.requested-at")).to_be_hidden()

    history_row(phone, delete_b).get_by_text("Details", exact=True).click()

    opened = history_row(phone, delete_b)
    expect(opened.locator("td.requested-at")).to_be_visible()
    expect(opened.locator("td.requested-at time")).to_have_text(shown(delete_b.requested_at))
    expect(opened.locator("td.requested-at")).to_contain_text("by alice")
    expect(opened.locator('td[data-label="Via"]')).to_have_text("api")
    assert reason.evaluate("cell => cell.scrollWidth <= cell.clientWidth")  # whole now
    assert opened.evaluate(ROW_LINES) > 3
    assert history_row(phone, email).evaluate(ROW_LINES) <= 3  # the others stay closed
    assert not (violations := axe_violations(phone)), described(violations)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
