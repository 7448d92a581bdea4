"""Previews of the demo tools: what a gated call will do, shown to whoever decides it.

A preview only looks. It never creates the sandbox (the tools do, when they run), never writes,
and never waits long on the network, because the loop computes it while deciding a turn and again
just before the approved call runs, comparing the `state` fingerprints.
"""
import codecs
import difflib
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from core.visible import reveal, reveal_line

from . import fetching
from .tools import Preview, ToolContext, ToolError

MAX_LINES = 40
MAX_CHARS = 4000
MAX_COMPARED_BYTES = 1_000_000  # a file larger than this is described, not diffed
RESOLVE_SECONDS = 2.0


def cut(text: str, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS) -> str:
    """The first `max_lines` lines of `text`, at most `max_chars` characters, saying what was left off."""
    body = text[:-1] if text.endswith("\n") else text
    lines = body.split("\n")
    if len(lines) > max_lines:
        body = "\n".join(lines[:max_lines])
        if len(body) <= max_chars:
            return f"{body}\n… {len(lines) - max_lines} more lines"
    if len(body) > max_chars:
        return f"{body[:max_chars]}\n… {len(body) - max_chars} more characters"
    return text


def _shown(text: str) -> str:
    """Invisible characters revealed first, so the limits hold for what is stored and shown."""
    return cut(reveal(text))


def _inside_sandbox(context: ToolContext, path: str) -> Path:
    """`path` resolved inside the sandbox, like the tools' `sandbox_path` but without creating it."""
    root = context.sandbox.resolve()
    candidate = (root / path).resolve()
    if candidate != root and root not in candidate.parents:
        raise ToolError(f"Refused: {path!r} is outside the sandbox.")
    return candidate


@dataclass(frozen=True)
class _File:
    size: int
    state: str
    head: bytes  # the whole content when size <= MAX_COMPARED_BYTES

    @property
    def is_whole(self) -> bool:
        return len(self.head) == self.size


def _examine(target: Path) -> _File | None:
    """Size, fingerprint and first bytes of a regular file, read through one descriptor; None if
    there is no regular file. Non-blocking and no-follow, so a fifo or a symlink swapped in after
    resolving cannot hang or redirect the read."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest, head, size = hashlib.sha256(), bytearray(), 0
        while chunk := file.read(1 << 16):
            digest.update(chunk)
            size += len(chunk)
            if len(head) < MAX_COMPARED_BYTES:
                head += chunk[: MAX_COMPARED_BYTES - len(head)]
    return _File(size=size, state=f"sha256:{digest.hexdigest()}", head=bytes(head))


def _fingerprint(target: Path, current: _File | None) -> str:
    if current is not None:
        return current.state
    return "folder" if target.is_dir() else "absent"


def state_of(context: ToolContext, path: str) -> str:
    """The fingerprint of `path` in the sandbox: "absent", "folder", or "sha256:<hex of its bytes>".

    The loop takes it when the call is gated and again just before it runs; a difference means the
    approver saw another file than the one the call would change."""
    target = _inside_sandbox(context, path)
    return _fingerprint(target, _examine(target))


def _as_text(data: bytes) -> str | None:
    """UTF-8 text, or None for binary content. A multi-byte character cut off at the end of a
    file's first bytes is not binary, so the decoder is told more may follow."""
    if b"\0" in data:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return None


def _lines(text: str) -> list[str]:
    """The lines of `text` with their newlines. Only "\n" ends a line, as in the file: str.splitlines
    also breaks at \r, U+2028 and others, and would show such a line as one without a final newline."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _diff(old: str, new: str, path: str) -> str:
    """A unified diff that, like git's, also shows a change of the final newline."""
    shown = []
    diff = difflib.unified_diff(_lines(old), _lines(new), f"a/{path}", f"b/{path}", lineterm="")
    for index, line in enumerate(diff):
        if index < 2 or line.startswith("@@"):
            shown.append(line)
        elif line.endswith("\n"):
            shown.append(line[:-1])
        else:
            shown += [line, "\\ No newline at end of file"]
    return "\n".join(shown)


def write_file_preview(context: ToolContext, path: str, content: str) -> Preview:
    target = _inside_sandbox(context, path)
    path = reveal_line(path)  # a newline in a name must not start a line of its own
    current = _examine(target)
    state = _fingerprint(target, current)
    new = content.encode()
    if current is None:
        if state == "folder":
            return Preview("text", _shown(f"{path} is a folder: the call will fail."), state)
        return Preview("file", _shown(f"New file {path}, {_bytes(len(new))}" + (f":\n{content}" if content else ".")), state)
    if current.is_whole and current.head == new:
        return Preview("text", _shown(f"No change: {path} already has this content."), state)
    old = _as_text(current.head) if current.is_whole else None
    if old is None:
        what = "binary content" if current.is_whole else "too much to compare"
        return Preview(
            "file", _shown(f"{path} has {_bytes(current.size)} ({what}); they become {_bytes(len(new))}:\n{content}"), state
        )
    return Preview("diff", _shown(_diff(old, content, path)), state)


def _bytes(size: int) -> str:
    return "1 byte" if size == 1 else f"{size} bytes"


def delete_file_preview(context: ToolContext, path: str) -> Preview:
    target = _inside_sandbox(context, path)
    path = reveal_line(path)
    current = _examine(target)
    state = _fingerprint(target, current)
    if current is None:
        what = "is a folder, not a file" if state == "folder" else "does not exist"
        return Preview("file", _shown(f"{path} {what}: the call will fail."), state)
    text = _as_text(current.head)
    if text is None:
        return Preview("file", _shown(f"{path} exists, {_bytes(current.size)} of binary content."), state)
    return Preview("file", _shown(f"{path} exists, {_bytes(current.size)}. It starts with:\n{text}"), state)


def delete_all_files_preview(context: ToolContext) -> Preview:
    """Every file that would go; the fingerprint covers their names and contents, so a file added
    or changed after the approval stops the run."""
    root = context.sandbox.resolve()
    if not root.is_dir():
        return Preview("file", "The sandbox is empty: nothing to delete.", "empty")
    manifest, listing = hashlib.sha256(), []
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())
    for name in names:
        entry = root / name
        if entry.is_symlink():
            listing.append(f"{reveal_line(name)} (a link)")
            manifest.update(f"{name}\0link:{os.readlink(entry)}\n".encode(errors="surrogateescape"))
            continue
        current = _examine(entry)
        listing.append(f"{reveal_line(name)}, {_bytes(current.size)}" if current else reveal_line(name))
        manifest.update(f"{name}\0{current.state if current else 'gone'}\n".encode(errors="surrogateescape"))
    if not names:
        return Preview("file", "The sandbox is empty: nothing to delete.", "empty")
    text = (f"{len(names)} files will be deleted:\n" if len(names) > 1 else "1 file will be deleted:\n") + "\n".join(listing)
    return Preview("file", _shown(text), f"sha256:{manifest.hexdigest()}")


def send_email_preview(context: ToolContext, to: str, subject: str, body: str = "") -> Preview:
    # One-line fields reveal their newlines: a subject must not pass for extra headers.
    return Preview("email", _shown(f"To: {reveal_line(to)}\nSubject: {reveal_line(subject)}\n\n{body}"))


def is_allowlisted(host: str, allowlist: list[str]) -> bool:
    """Whether `host` is a domain of the allowlist or under one (the web_fetch gate's rule)."""
    host = host.lower()
    return any(host == domain.lower() or host.endswith("." + domain.lower()) for domain in allowlist)


def _addresses(host: str) -> list[str] | None:
    """The host's addresses as web_fetch will look them up, or None if it does not resolve within
    RESOLVE_SECONDS."""
    if not host:
        return None
    try:
        return fetching.resolve(host, 0, fetching.Deadline(RESOLVE_SECONDS))
    except ToolError:
        return None


def web_fetch_preview(context: ToolContext, url: str) -> Preview:
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:  # an unbalanced [ in the address
        host = ""
    addresses = _addresses(host)
    lines = [
        f"Host: {reveal_line(host) or '(none)'}",
        f"Resolves to: {', '.join(addresses) if addresses else 'could not resolve'}",
        f"On the allowlist: {'yes' if is_allowlisted(host, context.agent.fetch_allowlist) else 'no'}",
    ]
    if addresses and not all(fetching.is_public_address(address) for address in addresses):
        lines.append("Private or loopback address: yes")
    return Preview("fetch", _shown("\n".join(lines)))
