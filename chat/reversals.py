"""The demo's file tools undone (chat.tools.Reversible, run by chat.undo): write_file puts back the
content it replaced (or removes the file it created), delete_file puts back the file it deleted,
each only while the file is still as the call left it."""
import base64
import hashlib

from . import previews
from .tools import Preview, Reversible, ToolContext, ToolError

MAX_KEPT_BYTES = 1_000_000  # a larger file is not kept: its call cannot be undone


def sandbox_path(context: ToolContext, path: str):
    from .demo_tools import sandbox_path as inside  # lazily: the demo tools declare these reversals

    return inside(context, path)


def _kept(arguments: dict, context: ToolContext) -> dict | None:
    """The file at `path` as it is now: its bytes (base64), or that there was none; None: too large to keep."""
    target = sandbox_path(context, arguments["path"])
    if not target.is_file():
        return {"existed": False}
    if target.stat().st_size > MAX_KEPT_BYTES:
        return None
    return {"existed": True, "content": base64.b64encode(target.read_bytes()).decode()}


def _left(arguments: dict, context: ToolContext) -> str:
    """What the file is now, as a fingerprint: its bytes' SHA-256, or "absent"."""
    target = sandbox_path(context, arguments["path"])
    return hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else "absent"


def _put_back(kept: dict, arguments: dict, context: ToolContext) -> str:
    path = arguments["path"]
    target = sandbox_path(context, path)
    if not kept["existed"]:
        target.unlink(missing_ok=True)
        return f"Removed {path}, which the call had created."
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(base64.b64decode(kept["content"]))
    return f"Restored {path} as it was before the call."


def _text(kept: dict) -> str | None:
    try:
        return base64.b64decode(kept["content"]).decode("utf-8")
    except (UnicodeDecodeError, ValueError):
        return None


def _write_undone(kept: dict, arguments: dict, context: ToolContext) -> Preview:
    path = arguments["path"]
    if not kept["existed"]:
        return Preview("file", f"{path} is removed: the call created it.")
    text = _text(kept)
    if text is None:
        return Preview("file", f"{path} gets back its earlier binary content.")
    return previews.write_file_preview(context, path, text)  # the diff from what it is now to what it was


def _delete_undone(kept: dict, arguments: dict, context: ToolContext) -> Preview:
    if not kept["existed"]:
        raise ToolError("There was no file to put back.")
    text = _text(kept)
    shown = f":\n{text}" if text is not None else " (binary content)."
    return Preview("file", f"{arguments['path']} is put back as it was when it was deleted{shown}")


WRITE_FILE = Reversible(before=_kept, after=_left, restore=_put_back, preview=_write_undone, keys=("path",))
DELETE_FILE = Reversible(before=_kept, after=_left, restore=_put_back, preview=_delete_undone, keys=("path",))
