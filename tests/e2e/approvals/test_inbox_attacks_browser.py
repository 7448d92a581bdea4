"""The card's scripts against what a model may send (issue 23): the edit form's live diff stays quick
on arguments of thousands of lines, and what it shows is text, never markup. No stack needed: the
scripts run on a page of their own in Chromium."""
import json
import os
import time
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

from approvals.models import Approval
from tests.conftest import wait_until
from tests.e2e.browser import browser, new_page, start, wait_for_pending  # noqa: F401  (fixtures)
from tests.e2e.browser import logged_in, open_dashboard

EDITDIFF_JS = Path(os.environ.get("HITL_EDITDIFF_JS", Path(__file__).resolve().parents[3] / "static/js/editdiff.js"))
MARKUP = "<img src=x onerror=window.owned=1>"


def edit_form(requested: dict, argument: str, text: str) -> str:
    """The edit form's parts that editdiff.js reads (partials/approval_edit.html)."""
    from django.utils.html import escape

    return (
        f'<form data-live-diff="diff" data-requested="{escape(json.dumps(requested))}">'
        f'<textarea id="field" data-argument="{argument}" data-widget="json">{escape(text)}</textarea></form>'
        '<pre id="diff"></pre>'
    )


def page_with(browser, html: str):  # noqa: F811
    page = browser.new_page()
    page.set_content(html)
    page.add_script_tag(content=EDITDIFF_JS.read_text())
    return page


def test_the_live_diff_of_thousands_of_lines_answers_each_key_at_once(browser):  # noqa: F811
    paths = [f"notes/file-{n}.txt" for n in range(12000)]
    page = page_with(browser, edit_form({"paths": paths}, "paths", json.dumps(paths, indent=2)))
    try:
        started = time.monotonic()
        page.evaluate("""() => {
          const field = document.getElementById("field");
          field.value = field.value.replace("file-5.txt", "file-5b.txt");
          field.dispatchEvent(new Event("input", { bubbles: true }));
        }""")
        elapsed = time.monotonic() - started
        shown = page.locator("#diff").inner_text()
        assert shown.index('"notes/file-5.txt",') < shown.index('"notes/file-5b.txt",')
        assert page.locator("#diff .diff-del .diff-code").all_text_contents() == ['    "notes/file-5.txt",']
        assert page.locator("#diff .diff-add .diff-code").all_text_contents() == ['    "notes/file-5b.txt",']
        assert elapsed < 1.0, f"one key took {elapsed:.1f} s"
    finally:
        page.close()


def test_the_live_diff_shows_markup_as_text(browser):  # noqa: F811
    page = page_with(browser, edit_form({"path": "a.txt"}, "path", json.dumps(MARKUP)))
    try:
        page.evaluate("""() => document.getElementById("field").dispatchEvent(new Event("input", { bubbles: true }))""")
        assert MARKUP in page.locator("#diff").inner_text()
        assert page.locator("#diff img").count() == 0 and page.evaluate("() => window.owned") is None
    finally:
        page.close()


@pytest.mark.e2e
def test_a_key_on_an_inbox_with_no_row_focused_only_reaches_the_first_row(new_page, alice, bob, agent, api_for):  # noqa: F811
    api = api_for(alice)
    [first] = wait_for_pending(start(api, "write hello to one.txt"), 1)
    page = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(page)

    page.keyboard.press("a")  # nothing focused yet: this only reaches the first row
    expect(page.locator("#dashboard-rows .is-focused")).to_have_attribute("data-approval-id", str(first.pk))
    with pytest.raises(PlaywrightTimeout):  # no decision sent within a second
        page.wait_for_event("request", lambda request: request.method == "POST", timeout=1000)
    assert Approval.objects.get(pk=first.pk).status == Approval.Status.PENDING

    page.keyboard.press("a")  # on the focused row, never opened: opens it and decides nothing
    expect(page.locator(f"#approval-row-{first.pk} > .row-open")).to_have_attribute("open", "")
    with pytest.raises(PlaywrightTimeout):
        page.wait_for_event("request", lambda request: request.method == "POST", timeout=1000)
    assert Approval.objects.get(pk=first.pk).status == Approval.Status.PENDING

    page.keyboard.press("a")  # on the focused row, open, its preview on screen: approves that one
    wait_until(lambda: Approval.objects.get(pk=first.pk).status == Approval.Status.APPROVED, message="approved")


def test_a_held_a_opens_the_row_and_approves_nothing(new_page, alice, bob, agent, api_for):  # noqa: F811
    api = api_for(alice)
    [first] = wait_for_pending(start(api, "write hello to one.txt"), 1)
    page = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(page)
    page.keyboard.press("j")

    page.keyboard.down("a")  # pressed: opens the row
    expect(page.locator(f"#approval-row-{first.pk} > .row-open")).to_have_attribute("open", "")
    for _ in range(5):
        page.keyboard.down("a")  # held: the browser repeats it, which approves nothing
    page.keyboard.up("a")

    with pytest.raises(PlaywrightTimeout):
        page.wait_for_event("request", lambda request: request.method == "POST", timeout=1000)
    assert Approval.objects.get(pk=first.pk).status == Approval.Status.PENDING
