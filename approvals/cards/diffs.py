"""A diff as a person reads it: rows of old and new line numbers, a sign and the text, removed lines
before added ones, the unified headers (`---`, `+++`, `@@`, "\\ No newline") turned into a few
words. Pure: no Django. Draws a preview's unified diff (chat.previews, a tool server's diff, an
outside agent's preview) and an edit (requested against edited) the same way static/js/editdiff.js
draws the edit form's live diff.

Nothing is hidden: every line inside a hunk is a row (its counts say which lines are the hunk's, so
a line of a file that itself starts with `---` or `@@` stays a line), and whatever is not a diff's
header is shown as it came, as a plain row.
"""
import difflib
import json
import re
from dataclasses import dataclass

CONTEXT = 3  # unchanged lines shown around a change of a file, as a unified diff has them
MAX_ROWS = 1000  # an edit's rows on a card (pushed to every tab); the arguments' fold has the whole text
ARGUMENTS_CONTEXT = 1  # around a change of the arguments' JSON
SIGNS = {"del": "−", "add": "+"}
SAID = {"del": "removed", "add": "added"}
LINES = {"same", "del", "add"}

# A call writes a file when its arguments name the file and give its whole new text, as
# chat.previews.write_file_preview reads them (and an MCP filesystem server's write_file takes them):
# its edit is shown as the lines of that text, not as a line of JSON.
FILE_PATH, FILE_CONTENT = "path", "content"

NO_NEWLINE = "\\ No newline at end of file"
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)")
_GIT_FILE = re.compile(r"diff --git (\S+) (\S+)")
_GIT_INDEX = re.compile(r"index [0-9a-f]+\.\.[0-9a-f]+(?: [0-7]+)?")


@dataclass(frozen=True)
class Row:
    """One row of a diff. `kind`: same, del, add (a line, with its numbers); gap (unchanged lines
    left out); note (what the headers said that matters: a final newline added or removed); file
    (which file the next lines are of); plain (text that is no part of a diff, as it came)."""

    kind: str
    text: str = ""
    old: int | None = None
    new: int | None = None

    @property
    def sign(self) -> str:
        return SIGNS.get(self.kind, "")

    @property
    def said(self) -> str:
        """The sign in words, for a screen reader."""
        return SAID.get(self.kind, "")

    @property
    def is_line(self) -> bool:
        return self.kind in LINES


def gap(count: int, section: str = "") -> Row:
    text = f"⋯ {count} unchanged line{'' if count == 1 else 's'}"
    return Row("gap", f"{text} · {section}" if section else text)


def newline_note(old_has_none: bool, new_has_none: bool) -> Row | None:
    """A change of the final newline, in words: none when both sides end alike."""
    if old_has_none == new_has_none:
        return None
    return Row("note", "Removes the newline at the end of the file." if new_has_none else "Adds a newline at the end of the file.")


def removed_first(rows: list[Row]) -> list[Row]:
    """Each run of changed lines as its removed lines, then its added ones: the same change, read
    as before and after."""
    ordered, run = [], []
    for row in rows + [Row("end")]:
        if row.kind in ("del", "add"):
            run.append(row)
            continue
        ordered += [r for r in run if r.kind == "del"] + [r for r in run if r.kind == "add"]
        run = []
        if row.kind != "end":
            ordered.append(row)
    return ordered


def _joined(hunk: list[Row], old_last: Row | None, new_last: Row | None) -> list[Row]:
    """A hunk's rows with a line removed and added that differs only by the newline the file ended
    without (`old_last`, `new_last`: the rows of such last lines) as one unchanged line: what
    happened to the newline is a note, and "− hello + hello + again" reads as "hello + again"."""
    joined, run = [], []
    for row in hunk + [Row("end")]:
        if row.kind in ("del", "add"):
            run.append(row)
            continue
        dels, adds = [r for r in run if r.kind == "del"], [r for r in run if r.kind == "add"]
        if dels and dels[-1] is old_last and (at := next((n for n, a in enumerate(adds) if a.text == old_last.text), None)) is not None:
            run = dels[:-1] + adds[:at] + [Row("same", old_last.text, old_last.old, adds[at].new)] + adds[at + 1:]
        elif adds and adds[-1] is new_last and (at := next((n for n, d in enumerate(dels) if d.text == new_last.text), None)) is not None:
            run = dels[:at] + adds[:-1] + [Row("same", new_last.text, dels[at].old, new_last.new)] + dels[at + 1:]
        joined += run + ([row] if row.kind != "end" else [])
        run = []
    return joined


def _path(name: str, prefix: str) -> str:
    name = name.rstrip("\t")  # git ends a name that has a space with a tab (what follows one is shown)
    return name[len(prefix):] if name.startswith(prefix) else name


def _file_row(old: str, new: str) -> Row:
    if old == "/dev/null":
        return Row("file", f"{new} (new file)")
    if new == "/dev/null":
        return Row("file", f"{old} (deleted)")
    return Row("file", old if old == new else f"{old} → {new}")


def rows(diff: str) -> list[Row]:
    """The rows of a unified diff (difflib's, git's, or any text: what is not a diff is plain rows).
    A file's name is a row where the diff names several files or has text besides (a tool server's
    preview); not for one file's changes alone, since a write's title names its file."""
    parsed: list[Row] = []
    lines = diff.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    old_left = new_left = 0  # the lines of the current hunk still to come, as its header counts them
    old_at = new_at = 0  # their numbers
    seen_old = 0  # the old file's last line shown or left out so far, for the gap before a hunk
    missing = [False, False]  # the hunk's old and new sides end without a newline
    last_sign = ""  # the sign of the hunk's line just read, for a "\ No newline" after it
    hunk_at = 0  # where the current hunk's rows start
    lacking: list[Row | None] = [None, None]  # the hunk's removed and added last lines without a newline
    named_at = -1  # the row naming the current file, while its git header lasts
    files = plain = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if last_sign and line == NO_NEWLINE:
            missing[0] = missing[0] or last_sign in " -"
            missing[1] = missing[1] or last_sign in " +"
            if last_sign != " ":
                lacking["-+".index(last_sign)] = parsed[-1]
            continue
        if old_left or new_left:
            sign, text = (line[:1], line[1:]) if line else (" ", "")
            if sign == " " and old_left and new_left:
                parsed.append(Row("same", text, old_at, new_at))
                old_at, new_at, old_left, new_left, last_sign = old_at + 1, new_at + 1, old_left - 1, new_left - 1, " "
                continue
            if sign == "-" and old_left:
                parsed.append(Row("del", text, old=old_at))
                old_at, old_left, last_sign = old_at + 1, old_left - 1, "-"
                continue
            if sign == "+" and new_left:
                parsed.append(Row("add", text, new=new_at))
                new_at, new_left, last_sign = new_at + 1, new_left - 1, "+"
                continue
            old_left = new_left = 0  # the hunk ends early (a preview cut short): the rest is text
        if last_sign:  # the hunk is over: what its "\ No newline" said, if it matters
            parsed[hunk_at:] = _joined(parsed[hunk_at:], *lacking) + ([note] if (note := newline_note(*missing)) else [])
            missing, last_sign, lacking = [False, False], "", [None, None]
        if hunk := _HUNK.fullmatch(line):
            old_start, old_count, new_start, new_count = (int(hunk[n]) if hunk[n] is not None else 1 for n in (1, 2, 3, 4))
            if (before := old_start - (1 if old_count else 0) - seen_old) > 0:
                parsed.append(gap(before, hunk[5].strip()))
            old_at, new_at, old_left, new_left = max(old_start, 1), max(new_start, 1), old_count, new_count
            seen_old, named_at, hunk_at = old_start + old_count - (1 if old_count else 0), -1, len(parsed)
            continue
        if git := _GIT_FILE.fullmatch(line):
            named_at, seen_old, files = len(parsed), 0, files + 1
            parsed.append(_file_row(_path(git[1], "a/"), _path(git[2], "b/")))
            continue
        if named_at >= 0 and _GIT_INDEX.fullmatch(line):  # blob ids: nothing a person reads
            continue
        if line.startswith("--- ") and index < len(lines) and lines[index].startswith("+++ "):
            named = _file_row(_path(line[4:], "a/"), _path(lines[index][4:], "b/"))
            index += 1
            if named_at >= 0:  # git named the file already: these say more (a new file, a deleted one)
                parsed[named_at] = named
            else:
                parsed.append(named)
                files += 1
            seen_old = 0
            continue
        parsed.append(Row("plain", line))
        plain += 1
    if last_sign:
        parsed[hunk_at:] = _joined(parsed[hunk_at:], *lacking) + ([note] if (note := newline_note(*missing)) else [])
    if files == 1 and not plain and parsed and parsed[0].kind == "file":
        parsed.pop(0)
    return removed_first(parsed)


def _texts(text: str) -> list[str]:
    """The lines of `text` without their newlines. Only "\n" ends a line, as in the file
    (str.splitlines also breaks at \r, U+2028 and others)."""
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") else lines if text else []


def _lacks_newline(text: str) -> bool:
    return bool(text) and not text.endswith("\n")


def text_rows(before: str, after: str, context: int = CONTEXT) -> list[Row]:
    """`before` against `after` line by line, as rows: every changed line, the unchanged ones at
    most `context` lines from a change, the others as gaps (a gap of one line is that line). Lines
    are compared without their newlines and a change of the final newline is said in words, so a
    line the old file ended without, followed now by more, is one unchanged line."""
    old, new = _texts(before), _texts(after)
    numbered: list[Row] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            numbered += [Row("same", old[i], i + 1, j1 + i - i1 + 1) for i in range(i1, i2)]
            continue
        numbered += [Row("del", old[i], old=i + 1) for i in range(i1, i2)]
        numbered += [Row("add", new[j], new=j + 1) for j in range(j1, j2)]
    note = newline_note(_lacks_newline(before), _lacks_newline(after))
    changes = [index for index, row in enumerate(numbered) if row.kind != "same"] or ([len(numbered) - 1] if note else [])
    if not changes:
        return []
    near = [False] * len(numbered)
    for change in changes:
        for index in range(max(0, change - context), min(len(numbered), change + context + 1)):
            near[index] = True
    shown: list[Row] = []
    hidden: list[Row] = []
    for row, is_near in zip(numbered + [None], near + [True]):
        if not is_near:
            hidden.append(row)
            continue
        shown += hidden if len(hidden) == 1 else [gap(len(hidden))] if hidden else []
        hidden = []
        if row is not None:
            shown.append(row)
    return capped(removed_first(shown)) + ([note] if note else [])


def capped(rows: list[Row]) -> list[Row]:
    """The first MAX_ROWS rows, saying how many more there are."""
    if len(rows) <= MAX_ROWS:
        return rows
    return rows[:MAX_ROWS] + [Row("note", f"… {len(rows) - MAX_ROWS} more rows, not shown here: the arguments hold the whole text.")]


def _pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def file_argument(arguments) -> str:
    """The argument holding the whole text of the file a call writes ("" for a call that writes none)."""
    if isinstance(arguments, dict) and isinstance(arguments.get(FILE_PATH), str) and isinstance(arguments.get(FILE_CONTENT), str):
        return FILE_CONTENT
    return ""


def _arguments_rows(before, after) -> list[Row]:
    """Arguments against arguments as their JSON's lines, unnumbered: they are no file's lines."""
    return [Row(row.kind, row.text) for row in text_rows(_pretty(before), _pretty(after), ARGUMENTS_CONTEXT)]


def edit_rows(requested, edited) -> list[Row]:
    """An edit as rows: the arguments' JSON lines that changed; for a call that writes a file, the
    other arguments so, then the lines of the file's text that changed, numbered."""
    name = file_argument(requested)
    if not name or not isinstance(edited, dict) or not isinstance(edited.get(name), str):
        return _arguments_rows(requested, edited)

    def rest(arguments: dict) -> dict:
        return {key: value for key, value in arguments.items() if key != name}

    shown = _arguments_rows(rest(requested), rest(edited)) if rest(requested) != rest(edited) else []
    changed = text_rows(requested[name], edited[name])
    return shown + ([Row("file", name)] if shown and changed else []) + changed
