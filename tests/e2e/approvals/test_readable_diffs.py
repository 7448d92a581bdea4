"""Readable diffs and edits in Chromium (issue 38, item 5), on a real stack: a write over an existing
file reads as its lines removed and added (numbered, − before +, no unified headers); the edit form
diffs the file's text, not its JSON, and the card's title follows the edit; the approved edit is
what ran. And, on a page of its own, the edit form's script draws a text's changes as the server
draws them (approvals.cards.diffs), invisible characters shown alike."""
import json
import os
from pathlib import Path

import pytest
from django.utils.html import escape
from playwright.sync_api import expect

from approvals.cards import diffs
from approvals.templatetags.approval_tags import _revealed
from core.visible import reveal
from tests.e2e.browser import (  # noqa: F401  (fixtures)
    browser,
    button,
    log_in,
    logged_in,
    new_page,
    open_conversation,
    open_dashboard,
    opened,
    page,
    row,
    say,
    start_with_files,
    wait_for_pending,
)

pytestmark = pytest.mark.e2e
EDITDIFF_JS = Path(os.environ.get("HITL_EDITDIFF_JS", Path(__file__).resolve().parents[3] / "static/js/editdiff.js"))

# Each row of a drawn diff: its kind (the class) and its cells' text, the hidden words left out.
ROWS = """(scope) => Array.from(scope.querySelectorAll("tbody tr")).map((tr) => [tr.className.replace("diff-", "")].concat(
  Array.from(tr.cells).map((td) => Array.from(td.childNodes).filter((n) => !(n.classList && n.classList.contains("visually-hidden"))).map((n) => n.textContent).join(""))))"""


def rows_of(scope) -> list[list[str]]:
    return scope.evaluate(ROWS)


def test_a_write_over_a_file_reads_as_lines_and_its_edit_as_the_files_lines(e2e, page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"notes.txt": "one\ntwo\nthree"})
    say(api, conversation_id, "write one\n2\nthree to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    write = page.locator(f"#tool-call-{approval.tool_call_id}")
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (11 bytes)")

    preview = write.locator("figure.preview-diff")
    expect(preview.locator("table.diff-rows")).to_be_visible()
    assert rows_of(preview) == [["same", "1", "1", "", "one"], ["del", "2", "", "−", "two"], ["add", "", "2", "+", "2"], ["same", "3", "3", "", "three"]]
    shown = preview.inner_text()
    assert "@@" not in shown and "---" not in shown and "+++" not in shown and "No newline" not in shown
    removed, added = preview.locator("tr.diff-del").bounding_box(), preview.locator("tr.diff-add").bounding_box()
    assert removed["y"] < added["y"]  # − above +
    assert preview.locator("tr.diff-del").evaluate("(tr) => getComputedStyle(tr).backgroundColor") == "rgb(255, 235, 233)"  # red
    assert preview.locator("tr.diff-add").evaluate("(tr) => getComputedStyle(tr).backgroundColor") == "rgb(230, 255, 236)"  # green

    write.get_by_role("link", name="Edit", exact=True).click()
    content = page.locator(f"#edit-{approval.pk}-content")
    live = page.locator(f"#edit-diff-{approval.pk}")
    expect(live).to_have_text("No change yet.")
    expect(write.locator("figure.live-diff figcaption")).to_have_text("Your changes to the file (− requested, + edited)")
    content.fill("one\nzwei\nthree")
    expect(live.locator("tr.diff-add")).to_have_count(1)
    assert rows_of(live) == [["same", "1", "1", "", "one"], ["del", "2", "", "−", "2"], ["add", "", "2", "+", "zwei"], ["same", "3", "3", "", "three"]]
    assert "content" not in live.inner_text()  # the file's lines, not a line of JSON
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (14 bytes)")  # the title follows the edit
    content.fill("one\nzwei\nthree\n")
    expect(live.locator("tr.diff-note")).to_have_text("Adds a newline at the end of the file.")
    assert [row[0] for row in rows_of(live)] == ["same", "del", "add", "same", "note"]  # "three" is kept: only its newline came
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (15 bytes)")

    button(write, "Approve edited").click()
    expect(write).to_have_attribute("data-status", "succeeded")
    expect(write.locator(".decided")).to_contain_text("✓ Approved as edited by alice via chat")
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (15 bytes)")  # the stored call's, pushed
    edit = write.locator("figure.edit-diff")
    assert rows_of(edit) == [
        ["same", "1", "1", "", "one"], ["del", "2", "", "−", "2"], ["add", "", "2", "+", "zwei"], ["same", "3", "3", "", "three"],
        ["note", "Adds a newline at the end of the file."],
    ]
    assert (e2e.sandbox_root / conversation_id / "notes.txt").read_text() == "one\nzwei\nthree\n"


def test_an_edit_cancelled_gives_the_card_its_title_back(e2e, page, alice, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"notes.txt": "one"})
    say(api, conversation_id, "write two to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    write = page.locator(f"#tool-call-{approval.tool_call_id}")

    write.get_by_role("link", name="Edit", exact=True).click()
    page.locator(f"#edit-{approval.pk}-path").fill("other.txt")
    expect(write.locator(".card-title")).to_have_text("Write other.txt (3 bytes)")
    live = page.locator(f"#edit-diff-{approval.pk}")
    assert rows_of(live) == [["same", "", "", "", "{"], ["del", "", "", "−", '  "path": "notes.txt"'], ["add", "", "", "+", '  "path": "other.txt"'], ["same", "", "", "", "}"]]
    write.get_by_role("link", name="Cancel", exact=True).click()

    expect(write.get_by_role("link", name="Edit", exact=True)).to_be_visible()
    expect(write.locator(".card-title")).to_have_text("Write notes.txt (3 bytes)")


def test_an_inbox_rows_title_follows_its_edit_too(e2e, new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    conversation_id = start_with_files(api, {"notes.txt": "one\ntwo"})
    say(api, conversation_id, "write one\n2 to notes.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    page = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(page)
    listed = opened(row(page, approval))
    assert rows_of(listed.locator("figure.preview-diff")) == [["same", "1", "1", "", "one"], ["del", "2", "", "−", "two"], ["add", "", "2", "+", "2"]]

    listed.get_by_role("link", name="Edit", exact=True).or_(button(listed, "Edit")).first.click()
    page.locator(f"#edit-{approval.pk}-content").fill("one\ntwo\nthree")
    expect(page.locator(f"#row-title-{approval.pk}")).to_have_text("Write notes.txt (13 bytes)")
    assert rows_of(page.locator(f"#edit-diff-{approval.pk}")) == [["same", "1", "1", "", "one"], ["del", "2", "", "−", "2"], ["add", "", "2", "+", "two"], ["add", "", "3", "+", "three"]]


# --- The script draws what the server draws (no stack: a page of its own) -------------------------

CASES = [
    ("one\ntwo\nthree\n", "one\n2\nthree\n"),
    ("same\n", "same"),
    ("same", "same\n"),
    ("", "new\nfile\n"),
    ("gone\n", ""),
    ("".join(f"line {n}\n" for n in range(1, 40)), "".join(f"line {n}\n" for n in range(1, 40)).replace("line 3\n", "").replace("line 30\n", "line 30\nextra\n")),
    ("keep\n--- a/x\n@@ -1 +1 @@\n", "keep\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n"),
    ("hello", "hello\nagain"),
    ("a\nX", "X\nb"),
    ("one\ntwo\n", "one\ntwo"),
    ("".join(f"line {n}\r\n" for n in range(1500)), "".join(f"line {n}\n" for n in range(1500))),  # past MAX_ROWS
    ("a\u202eb\n\ttab\r\n", "a\u200bb\n\ttab\n"),
]


def test_the_scripts_rows_are_the_servers_rows(browser):  # noqa: F811
    page = browser.new_page()
    try:
        for before, after in CASES:
            requested = {"path": "f.txt", "content": before}
            page.set_content(
                f'<form data-live-diff="diff" data-file-argument="content" data-requested="{escape(json.dumps(requested))}">'
                f'<textarea id="field" data-argument="content" data-widget="text"></textarea></form><div id="diff"></div>'
            )
            page.add_script_tag(content=EDITDIFF_JS.read_text())
            page.evaluate("""(text) => {
              const field = document.getElementById("field");
              field.value = text;
              field.dispatchEvent(new Event("input", { bubbles: true }));
            }""", after)
            drawn = rows_of(page.locator("#diff"))
            served = [
                [row.kind, str(row.old or ""), str(row.new or ""), row.sign, row.text] if row.is_line else [row.kind, row.text]
                for row in _revealed(diffs.text_rows(before, after))
            ]
            assert drawn == served, (before, after)
    finally:
        page.close()


def test_the_script_reveals_what_the_server_reveals(browser):  # noqa: F811
    codes = [*range(0, 10), *range(11, 32), 127, 0x85, 0xAD, 0x34F, 0x61C, 0x115F, 0x180E, 0x200B, 0x200E, 0x202E, 0x2028, 0x2029,
             0x2066, 0x3164, 0xD800, 0xFE0F, 0xFEFF, 0xFFA0, 0xE0001, 0xE0041, 0xE01EF]
    hidden = "".join(f"{chr(code)}." for code in codes)  # a line of them (with \t and \r), requested
    page = browser.new_page()
    try:
        requested = {"path": "f.txt", "content": hidden}
        page.set_content(
            f'<form data-live-diff="diff" data-file-argument="content" data-requested="{escape(json.dumps(requested))}">'
            f'<textarea id="field" data-argument="content" data-widget="text"></textarea></form><div id="diff"></div>'
        )
        page.add_script_tag(content=EDITDIFF_JS.read_text())
        shown = page.evaluate("""() => {
          const field = document.getElementById("field");
          field.value = "other";
          field.dispatchEvent(new Event("input", { bubbles: true }));
          return document.querySelector("#diff .diff-del .diff-code").textContent;
        }""")
        assert shown == reveal(hidden).replace("\r", "⟨U+000D⟩")
        assert "⟨U+0009⟩" not in shown and "\t" in shown  # a tab is what it looks like
    finally:
        page.close()
