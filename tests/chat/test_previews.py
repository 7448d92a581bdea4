"""Previews of the demo tools: what the approver is shown, and the fingerprint the run checks."""
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from chat import previews
from chat.previews import (
    cut,
    delete_all_files_preview,
    delete_file_preview,
    send_email_preview,
    state_of,
    web_fetch_preview,
    write_file_preview,
)
from chat.tools import ToolContext, ToolError


@pytest.fixture
def context(tmp_path) -> ToolContext:
    return ToolContext(conversation_id="x", agent=SimpleNamespace(fetch_allowlist=["example.com"]), sandbox=tmp_path)


def test_write_file_shows_a_diff_of_old_and_new_lines(context, tmp_path):
    (tmp_path / "notes.txt").write_text("keep\nold\n")
    preview = write_file_preview(context, path="notes.txt", content="keep\nnew\n")
    assert preview.kind == "diff"
    lines = preview.text.splitlines()
    assert lines[:2] == ["--- a/notes.txt", "+++ b/notes.txt"]
    assert "-old" in lines and "+new" in lines and " keep" in lines


def test_write_file_diff_shows_a_lost_final_newline(context, tmp_path):
    (tmp_path / "notes.txt").write_text("same\n")
    preview = write_file_preview(context, path="notes.txt", content="same")
    assert preview.text.splitlines()[-3:] == ["-same", "+same", "\\ No newline at end of file"]


def test_write_file_diff_breaks_lines_only_at_newlines(context, tmp_path):
    (tmp_path / "notes.txt").write_bytes("a\u2028b\r\nkeep\n".encode())
    preview = write_file_preview(context, path="notes.txt", content="a\u2028c\r\nkeep\n")
    assert preview.text.split("\n")[-3:] == ["-a⟨U+2028⟩b\r", "+a⟨U+2028⟩c\r", " keep"]  # one line each, ending as they do
    assert "No newline" not in preview.text


def test_write_file_of_a_new_file_shows_its_content(context):
    preview = write_file_preview(context, path="docs/new.txt", content="hello\nworld\n")
    assert preview == previews.Preview("file", "New file docs/new.txt, 12 bytes:\nhello\nworld\n", "absent")


def test_write_file_with_the_same_content_says_no_change(context, tmp_path):
    (tmp_path / "notes.txt").write_text("same\n")
    preview = write_file_preview(context, path="notes.txt", content="same\n")
    assert (preview.kind, preview.text) == ("text", "No change: notes.txt already has this content.")


def test_write_file_over_binary_content_says_so(context, tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG\0\0\xff")
    preview = write_file_preview(context, path="image.png", content="text")
    assert preview.kind == "file"
    assert preview.text.startswith("image.png has 7 bytes (binary content); they become 4 bytes:")


def test_delete_file_shows_size_and_first_lines(context, tmp_path):
    (tmp_path / "a.txt").write_text("first\nsecond\n")
    preview = delete_file_preview(context, path="a.txt")
    assert (preview.kind, preview.text) == ("file", "a.txt exists, 13 bytes. It starts with:\nfirst\nsecond\n")


def test_delete_file_of_binary_content_shows_no_lines(context, tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2\3")
    assert delete_file_preview(context, path="blob.bin").text == "blob.bin exists, 4 bytes of binary content."


def test_delete_file_of_a_missing_file_says_the_call_will_fail(context):
    preview = delete_file_preview(context, path="gone.txt")
    assert preview == previews.Preview("file", "gone.txt does not exist: the call will fail.", "absent")


def test_long_file_is_cut_with_the_count_of_lines_left_off(context, tmp_path):
    (tmp_path / "long.txt").write_text("".join(f"line {n}\n" for n in range(100)))
    lines = delete_file_preview(context, path="long.txt").text.splitlines()
    assert len(lines) == 41
    assert lines[1] == "line 0" and lines[39] == "line 38"
    assert lines[-1] == "… 61 more lines"


def test_cut_by_characters_says_how_many_were_left_off():
    assert cut("x" * 5000) == "x" * 4000 + "\n… 1000 more characters"
    assert cut("short\ntext\n") == "short\ntext\n"


def test_state_is_absent_for_a_missing_file(context):
    assert state_of(context, "missing.txt") == "absent"


def test_state_changes_when_the_file_changes(context, tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("one")
    before = state_of(context, "a.txt")
    assert before.startswith("sha256:") and len(before) == len("sha256:") + 64
    assert write_file_preview(context, path="a.txt", content="x").state == before
    assert delete_file_preview(context, path="a.txt").state == before
    target.write_text("two")
    assert state_of(context, "a.txt") != before
    target.unlink()
    assert state_of(context, "a.txt") == "absent"


def test_delete_all_files_state_changes_when_a_file_is_added(context, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    before = delete_all_files_preview(context)
    assert before.text == "1 file will be deleted:\na.txt, 1 byte"
    (tmp_path / "b.txt").write_text("b")
    assert delete_all_files_preview(context).state != before.state


def test_email_preview_lays_out_headers_and_body(context):
    preview = send_email_preview(context, to="bob@example.com", subject="Hi", body="Line one\nLine two")
    assert preview == previews.Preview("email", "To: bob@example.com\nSubject: Hi\n\nLine one\nLine two", "")


def test_email_preview_reveals_a_right_to_left_override_in_the_address(context):
    preview = send_email_preview(context, to="bob@\u202emoc.elpmaxe", subject="Hi")
    assert preview.text.splitlines()[0] == "To: bob@⟨U+202E⟩moc.elpmaxe"


def test_email_subject_cannot_pass_for_extra_headers(context):
    preview = send_email_preview(context, to="bob@example.com", subject="Hi\nBcc: eve@example.com")
    assert preview.text.splitlines()[1] == "Subject: Hi⟨U+000A⟩Bcc: eve@example.com"


def test_fetch_of_localhost_is_private_and_not_on_the_allowlist(context):
    preview = web_fetch_preview(context, url="http://localhost:1/")
    lines = preview.text.splitlines()
    assert preview.kind == "fetch" and preview.state == ""
    assert lines[0] == "Host: localhost"
    assert "127.0.0.1" in lines[1]
    assert "On the allowlist: no" in lines
    assert "Private or loopback address: yes" in lines


def test_fetch_of_an_allowlisted_subdomain_says_yes(context, monkeypatch):
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, **kwargs: [(2, 1, 6, "", ("93.184.215.14", 0))])
    lines = web_fetch_preview(context, url="https://docs.example.com/page").text.splitlines()
    assert lines == ["Host: docs.example.com", "Resolves to: 93.184.215.14", "On the allowlist: yes"]


def test_fetch_of_an_unresolvable_host_says_so(context, monkeypatch):
    def fail(host, port, **kwargs):
        raise socket.gaierror("no such host")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    lines = web_fetch_preview(context, url="https://nowhere.example.org/").text.splitlines()
    assert lines[1:] == ["Resolves to: could not resolve", "On the allowlist: no"]


def test_fetch_preview_does_not_wait_for_a_stuck_resolver(context, monkeypatch):
    released = threading.Event()
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, **kwargs: released.wait(10) and [])
    monkeypatch.setattr(previews, "RESOLVE_SECONDS", 0.2)
    started = time.monotonic()
    try:
        text = web_fetch_preview(context, url="https://slow.example.com/").text
    finally:
        released.set()
    assert time.monotonic() - started < 2
    assert "Resolves to: could not resolve" in text


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x"])
def test_paths_leaving_the_sandbox_are_refused(context, path):
    with pytest.raises(ToolError, match="outside the sandbox"):
        write_file_preview(context, path=path, content="x")
    with pytest.raises(ToolError, match="outside the sandbox"):
        delete_file_preview(context, path=path)
    with pytest.raises(ToolError, match="outside the sandbox"):
        state_of(context, path)


def test_a_link_out_of_the_sandbox_is_refused(context, tmp_path):
    (tmp_path / "escape").symlink_to("/etc/hostname")
    with pytest.raises(ToolError, match="outside the sandbox"):
        delete_file_preview(context, path="escape")


def test_previews_never_create_the_sandbox(tmp_path):
    sandbox = tmp_path / "fresh" / "conversation"
    context = ToolContext(conversation_id="x", agent=SimpleNamespace(fetch_allowlist=[]), sandbox=sandbox)
    write_file_preview(context, path="dir/a.txt", content="hello")
    delete_file_preview(context, path="a.txt")
    delete_all_files_preview(context)
    state_of(context, "a.txt")
    assert not (tmp_path / "fresh").exists()
