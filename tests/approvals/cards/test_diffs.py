"""A diff as a person reads it (issue 38, item 5): a unified diff parsed into rows of line numbers,
− before +, no headers, every changed line kept; an edit drawn as the lines of the file it writes."""
import difflib
import random

import pytest
from django.template.loader import render_to_string

from approvals.cards import diffs
from approvals.cards.diffs import Row
from approvals.templatetags.approval_tags import diff_rows
from chat.previews import _diff


def lines(rows: list[Row]) -> list[tuple]:
    return [(row.kind, row.old, row.new, row.text) for row in rows]


def test_one_changed_line_is_a_removed_row_then_an_added_row_without_headers():
    unified = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-one\n\\ No newline at end of file\n+two\n\\ No newline at end of file"
    assert lines(diffs.rows(unified)) == [("del", 1, None, "one"), ("add", None, 1, "two")]  # both end alike: nothing to say


def test_hunks_are_numbered_and_parted_by_the_unchanged_lines_between_them():
    old = "".join(f"line {n}\n" for n in range(1, 31))
    new = old.replace("line 2\n", "line two\n").replace("line 20\n", "line twenty\n")
    rows = diffs.rows(_diff(old, new, "notes.txt"))
    assert lines(rows)[:6] == [
        ("same", 1, 1, "line 1"), ("del", 2, None, "line 2"), ("add", None, 2, "line two"),
        ("same", 3, 3, "line 3"), ("same", 4, 4, "line 4"), ("same", 5, 5, "line 5"),
    ]
    assert rows[6] == Row("gap", "⋯ 11 unchanged lines")  # 6 to 16
    assert lines(rows[7:11]) == [("same", 17, 17, "line 17"), ("same", 18, 18, "line 18"), ("same", 19, 19, "line 19"), ("del", 20, None, "line 20")]
    assert rows[-1] == Row("same", "line 23", 23, 23) and len(rows) == 15


def test_a_hunk_after_the_files_start_says_how_many_lines_come_before_it():
    rows = diffs.rows("@@ -8,2 +8,2 @@ def main():\n a\n-b\n+c")
    assert rows[0] == Row("gap", "⋯ 7 unchanged lines · def main():")
    assert lines(rows[1:]) == [("same", 8, 8, "a"), ("del", 9, None, "b"), ("add", None, 9, "c")]


def test_an_insertion_is_numbered_from_the_line_it_follows():
    rows = diffs.rows("@@ -5,0 +6,2 @@\n+x\n+y")
    assert rows == [Row("gap", "⋯ 5 unchanged lines"), Row("add", "x", new=6), Row("add", "y", new=7)]


def test_lines_of_the_file_that_look_like_headers_stay_lines():
    old = "keep\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n"
    new = "keep\n---- a/y\n+++ b/x\n@@ -9 +9 @@\n\\ No newline at end of file\n++ more\n"
    rows = diffs.rows(_diff(old, new, "f.txt"))
    assert rows[0] == Row("same", "keep", 1, 1)
    assert {row.text for row in rows if row.kind == "del"} == {"--- a/x", "@@ -1 +1 @@"}
    assert {row.text for row in rows if row.kind == "add"} == {"---- a/y", "@@ -9 +9 @@", "++ more"}
    assert ("same", 5, 5, "\\ No newline at end of file") in lines(rows)  # the file's own line, not the marker
    assert not [row for row in rows if row.kind in ("file", "plain", "gap")]


@pytest.mark.parametrize(
    ("old", "new", "shown"),
    [
        ("same\n", "same", [("same", 1, 1, "same"), ("note", None, None, "Removes the newline at the end of the file.")]),
        ("same", "same\n", [("same", 1, 1, "same"), ("note", None, None, "Adds a newline at the end of the file.")]),
        ("a\nb", "a\nc", [("same", 1, 1, "a"), ("del", 2, None, "b"), ("add", None, 2, "c")]),  # neither ends with one: nothing to say
        ("hello", "hello\nagain", [("same", 1, 1, "hello"), ("add", None, 2, "again")]),  # not "− hello + hello + again"
        ("one\ntwo\n", "one\ntwo", [("same", 1, 1, "one"), ("same", 2, 2, "two"), ("note", None, None, "Removes the newline at the end of the file.")]),
        ("x\nlast", "x\nlast\n", [("same", 1, 1, "x"), ("same", 2, 2, "last"), ("note", None, None, "Adds a newline at the end of the file.")]),
        ("a\nX", "X\nb", [("del", 1, None, "a"), ("same", 2, 1, "X"), ("add", None, 2, "b")]),
    ],
)
def test_a_change_of_the_final_newline_is_said_once_in_words(old, new, shown):
    rows = diffs.rows(_diff(old, new, "n.txt"))
    assert lines(rows) == shown
    assert not any("No newline" in row.text for row in rows)
    assert lines(diffs.text_rows(old, new)) == shown  # the edit's rows, compared without the unified diff


def test_a_new_and_a_deleted_file_in_one_diff_are_each_named():
    unified = (
        "diff --git a/new.txt b/new.txt\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\nindex 3b18e51..0000000\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n"
    )
    assert diffs.rows(unified) == [
        Row("file", "new.txt (new file)"), Row("plain", "new file mode 100644"), Row("add", "a", new=1), Row("add", "b", new=2),
        Row("file", "old.txt (deleted)"), Row("plain", "deleted file mode 100644"), Row("del", "gone", old=1),
    ]


def test_a_lone_files_diff_is_not_named_but_a_renamed_one_says_both_names():
    assert diffs.rows("--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+a") == [Row("add", "a", new=1)]  # its card's title names it
    two = diffs.rows("--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n--- a/z\n+++ b/z\n@@ -1 +1 @@\n-c\n+d")
    assert [row.text for row in two if row.kind == "file"] == ["x → y", "z"]


def test_text_that_is_no_diff_is_shown_as_it_came():
    text = "git → git_commit\nThe server says: destructive.\n\n--- not a header\n@@ nor this @@\n\\ nor this\n… 3 more lines"
    assert diffs.rows(text) == [Row("plain", line) for line in text.split("\n")]


def test_a_preview_cut_short_ends_its_hunk_and_says_what_was_left_off():
    rows = diffs.rows("@@ -1,50 +1,50 @@\n-a\n+b\n c\n… 47 more lines")
    assert rows == [Row("del", "a", old=1), Row("add", "b", new=1), Row("same", "c", 2, 2), Row("plain", "… 47 more lines")]


def test_changes_read_as_removed_then_added_whatever_order_the_diff_gives():
    rows = diffs.rows("@@ -1,2 +1,2 @@\n+x\n-a\n+y\n-b")
    assert lines(rows) == [("del", 1, None, "a"), ("del", 2, None, "b"), ("add", None, 1, "x"), ("add", None, 2, "y")]


def _with_newlines(text: str) -> list[str]:
    """The lines as chat.previews._diff compares them: each with its newline."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _changed(old: list, new: list) -> tuple[set, set]:
    """The old and the new line numbers difflib does not match up."""
    olds, news = set(), set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            olds.update(range(i1 + 1, i2 + 1))
            news.update(range(j1 + 1, j2 + 1))
    return olds, news


def test_every_changed_line_is_a_row_with_the_number_it_has_in_its_file():
    generator = random.Random(38)
    words = ["a", "b", "c", "---", "+++ b", "@@ -1 +1 @@", "", " ", "\\ No newline at end of file"]
    for _ in range(500):
        old_lines = [generator.choice(words) for _ in range(generator.randrange(0, 12))]
        new_lines = [generator.choice(words) for _ in range(generator.randrange(0, 12))]
        old = "\n".join(old_lines) + ("\n" if generator.random() < .6 else "")
        new = "\n".join(new_lines) + ("\n" if generator.random() < .6 else "")
        old_of, new_of = old.split("\n"), new.split("\n")
        lacks = (bool(old) and not old.endswith("\n"), bool(new) and not new.endswith("\n"))
        parsed, compared = diffs.rows(_diff(old, new, "f")), diffs.text_rows(old, new)
        for rows in (parsed, compared):
            for row in rows:  # each line is the line its numbers say
                if row.kind in ("same", "del"):
                    assert old_of[row.old - 1] == row.text, (old, new, row)
                if row.kind in ("same", "add"):
                    assert new_of[row.new - 1] == row.text, (old, new, row)
            olds = [row.old for row in rows if row.kind in ("same", "del")]
            news = [row.new for row in rows if row.kind in ("same", "add")]
            assert olds == sorted(set(olds)) and news == sorted(set(news)), (old, new, rows)  # in order, once each
            notes = [row for row in rows if row.kind == "note"]
            assert notes == ([diffs.newline_note(*lacks)] if lacks[0] != lacks[1] else []), (old, new, rows)
            assert not [row for row in rows if row.kind in ("file", "plain")], (old, new, rows)
        # Nothing changed is left out: the diff's changed lines are rows (one that only gained or lost
        # the newline after it may read as unchanged, the note saying so).
        olds, news = _changed(_with_newlines(old), _with_newlines(new))
        assert olds <= {row.old for row in parsed}, (old, new, parsed)
        assert news <= {row.new for row in parsed}, (old, new, parsed)
        olds, news = _changed(diffs._texts(old), diffs._texts(new))
        assert olds == {row.old for row in compared if row.kind == "del"}, (old, new, compared)
        assert news == {row.new for row in compared if row.kind == "add"}, (old, new, compared)


def test_text_rows_count_the_unchanged_lines_after_the_last_change_too():
    old = "".join(f"{n}\n" for n in range(1, 21))
    rows = diffs.text_rows(old, old.replace("10\n", "ten\n"))
    assert rows[0] == Row("gap", "⋯ 6 unchanged lines") and rows[-1] == Row("gap", "⋯ 7 unchanged lines")
    assert diffs.text_rows("same\n", "same\n") == []


def test_an_edit_of_a_written_file_is_its_lines_and_the_other_arguments_json():
    requested = {"path": "notes.txt", "content": "one\ntwo\n"}
    assert diffs.edit_rows(requested, {"path": "notes.txt", "content": "one\n2\n"}) == [
        Row("same", "one", 1, 1), Row("del", "two", old=2), Row("add", "2", new=2),
    ]
    moved = diffs.edit_rows(requested, {"path": "other.txt", "content": "one\n2\n"})
    assert moved[:4] == [Row("same", "{"), Row("del", '  "path": "notes.txt"'), Row("add", '  "path": "other.txt"'), Row("same", "}")]
    assert moved[4] == Row("file", "content") and moved[5:] == diffs.text_rows("one\ntwo\n", "one\n2\n")
    assert diffs.edit_rows(requested, {"path": "other.txt", "content": "one\ntwo\n"})[1:3] == [
        Row("del", '  "path": "notes.txt"'), Row("add", '  "path": "other.txt"'),
    ]


def test_an_edit_of_a_call_that_writes_no_file_is_its_json_removed_then_added():
    rows = diffs.edit_rows({"to": "bob@example.com", "subject": "lunch"}, {"to": "bob@example.com", "subject": "lunch at noon"})
    assert rows == [
        Row("same", "{"), Row("del", '  "subject": "lunch",'), Row("add", '  "subject": "lunch at noon",'), Row("same", '  "to": "bob@example.com"'),
        Row("same", "}"),  # one line left out would take a row to say so: it is shown
    ]
    assert diffs.file_argument({"path": "a", "content": "b"}) == "content"
    assert diffs.file_argument({"to": "a", "content": "b"}) == diffs.file_argument({"path": "a", "content": 3}) == ""


def test_the_filter_reveals_invisible_characters_and_carriage_returns_in_each_row():
    rows = diff_rows("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-safe\r\n+sa\u202efe\u200b")
    assert [row.text for row in rows] == ["safe⟨U+000D⟩", "sa⟨U+202E⟩fe⟨U+200B⟩"]
    assert diff_rows(None) == [] and diff_rows("plain\u2028text") == [Row("plain", "plain⟨U+2028⟩text")]


def test_the_rows_are_drawn_as_numbered_lines_without_any_unified_header():
    approval = type("Shown", (), {"preview": {"kind": "diff", "text": _diff("a\nb\nc\n", "a\nB\nc", "notes.txt")}})()
    html = render_to_string("partials/approval_preview.html", {"approval": approval})
    assert "@@" not in html and "---" not in html and "+++" not in html and "No newline" not in html
    removed = '<tr class="diff-del"><td class="diff-ln">2</td><td class="diff-ln"></td><td class="diff-sign"><span aria-hidden="true">−</span><span class="visually-hidden">removed</span></td><td class="diff-code">b</td></tr>'
    added = '<tr class="diff-add"><td class="diff-ln"></td><td class="diff-ln">2</td><td class="diff-sign"><span aria-hidden="true">+</span><span class="visually-hidden">added</span></td><td class="diff-code">B</td></tr>'
    assert removed in html and added in html and html.index(removed) < html.index(added)
    assert '<tr class="diff-note"><td colspan="4">Removes the newline at the end of the file.</td></tr>' in html
    markup = type("Shown", (), {"preview": {"kind": "diff", "text": "@@ -1 +1 @@\n-<b>x</b>\n+<img src=x>"}})()
    drawn = render_to_string("partials/approval_preview.html", {"approval": markup})
    assert "&lt;img src=x&gt;" in drawn and "<img" not in drawn


def test_an_edit_of_thousands_of_lines_is_drawn_in_at_most_a_thousand_rows_saying_how_many_more():
    before = "".join(f"line {n}\n" for n in range(3000))
    rows = diffs.text_rows(before, before.replace("\n", "\r\n"))  # every line's end changed
    assert len(rows) == diffs.MAX_ROWS + 1
    assert rows[-1] == Row("note", "… 5000 more rows, not shown here: the arguments hold the whole text.")
