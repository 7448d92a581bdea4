"""A file question's answer, uploaded on its card: checked against the question's types and size
limit, then stored in the conversation's sandbox (HITL_SANDBOX_ROOT/<conversation>/uploads/), where
the agent's file tools find it. What the model reads is the stored path and size."""
import mimetypes
import re
from pathlib import Path

from django.conf import settings

from .questions import InvalidAnswer, StoredFile, accepts

UPLOADS = "uploads"
CHUNK = 64 * 1024
MAX_NAME_CHARS = 100


def store(approval, uploaded) -> StoredFile:
    """Store `uploaded` (a Django UploadedFile, or None) as the answer of the file question
    `approval`, or InvalidAnswer saying why not (no file, too big, a type it does not take): then
    nothing is stored and the question stays open. Written under a name of its own, never over
    another file; a file longer than it said it was is refused as it is read."""
    question = approval.question or {}
    if uploaded is None:
        raise InvalidAnswer("Choose a file to upload.")
    most = min(int(question.get("max_bytes") or settings.HITL_MAX_UPLOAD_BYTES), settings.HITL_MAX_UPLOAD_BYTES)
    if uploaded.size is None or uploaded.size > most:
        raise InvalidAnswer(f"The file is {_size(uploaded.size or 0)}; this question takes files of at most {_size(most)}.")
    name = _safe_name(uploaded.name or "")
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if not accepts(question, name, content_type):
        raise InvalidAnswer(f"{name} is not a type this question takes: {', '.join(question['accept'])}.")
    folder = _folder(approval)
    target, written = _claim(folder, name), 0
    try:
        with target.open("wb") as out:
            for chunk in uploaded.chunks(CHUNK):
                written += len(chunk)
                if written > most:
                    raise InvalidAnswer(f"The file is larger than {_size(most)}, the most this question takes.")
                out.write(chunk)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return StoredFile(approval_id=approval.pk, path=f"{UPLOADS}/{target.name}", size=written, name=name, content_type=content_type)


def _folder(approval) -> Path:
    """The conversation's uploads folder, made if need be: a real folder inside its sandbox, never a
    file or a link elsewhere that the agent's tools left in its place."""
    sandbox = Path(settings.HITL_SANDBOX_ROOT) / str(approval.conversation_id)
    folder = sandbox / UPLOADS
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InvalidAnswer(f"The conversation's files hold a file named {UPLOADS}, where uploads go: rename it first.") from None
    if folder.is_symlink() or not folder.resolve().is_relative_to(sandbox.resolve()):
        raise InvalidAnswer(f"The conversation's {UPLOADS} folder is a link out of its files: nothing is stored there.")
    return folder


def discard(approval, stored: StoredFile) -> None:
    """Remove a stored file whose answer was refused (decided meanwhile, expired): nothing is kept."""
    (Path(settings.HITL_SANDBOX_ROOT) / str(approval.conversation_id) / stored.path).unlink(missing_ok=True)


def _safe_name(name: str) -> str:
    """The upload's name as a plain file name: its last part, letters, digits, dots, dashes and
    underscores only, never hidden, never empty."""
    base = re.split(r"[\\/]", name)[-1]
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._") or "upload"
    stem, dot, ext = cleaned.rpartition(".")
    if dot and len(ext) <= 20:
        return f"{stem[:MAX_NAME_CHARS - len(ext) - 1]}.{ext}"
    return cleaned[:MAX_NAME_CHARS]


def _claim(folder: Path, name: str) -> Path:
    """A path in `folder` for `name` that no file has, created empty now (so two uploads never share one)."""
    stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
    for n in range(1, 1000):
        candidate = folder / (name if n == 1 else f"{stem}-{n}{dot}{ext}")
        try:
            candidate.touch(exist_ok=False)
            return candidate
        except FileExistsError:
            continue
    raise InvalidAnswer("Too many files of that name were uploaded here already: rename it.")


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.0f} KB"
    return f"{n / 1024 / 1024:.1f} MB"
