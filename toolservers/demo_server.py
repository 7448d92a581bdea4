"""A small MCP server of this project's own, written with the `mcp` SDK: notes in a folder
(NOTES_DIR), with tools annotated read-only, additive and destructive, one that fails, one whose
answer is huge and one that answers with an image. The demo agent and the tests use it over stdio
(`python -m toolservers.demo_server`) and over streamable HTTP (`… --http PORT`).

It imports nothing of Django: it is a separate program, as any MCP server would be."""
import argparse
import base64
import os
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Elicit, MCPServer, RequestStateSecurity, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

# The request state a tool's question travels with is sealed with this key, so another process of
# this server (stdio starts one per call) accepts the answer; it expires after NOTES_STATE_TTL seconds.
STATE = RequestStateSecurity(
    keys=[os.environ.get("NOTES_STATE_KEY", "demo-only-request-state-key-set-NOTES_STATE_KEY-in-production")], ttl=float(os.environ.get("NOTES_STATE_TTL", "600"))
)
server = MCPServer("notes", instructions="Notes kept as text files in one folder.", request_state_security=STATE)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# A 1×1 PNG: enough for a client to have to say it got an image.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def folder() -> Path:
    path = Path(os.environ.get("NOTES_DIR", "var/demo-notes")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def note(name: str) -> Path:
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ToolError(f"{name!r} is not a note name (no folders, no leading dot).")
    return folder() / name


@server.tool(annotations=READ_ONLY)
def list_notes() -> str:
    """List the notes."""
    names = sorted(path.name for path in folder().iterdir() if path.is_file())
    return "\n".join(names) or "No notes."


@server.tool(annotations=READ_ONLY)
def read_note(name: str) -> str:
    """Read one note."""
    path = note(name)
    if not path.exists():
        raise ToolError(f"There is no note {name!r}.")
    return path.read_text()


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
def write_note(name: str, text: str) -> str:
    """Write a note (a new one, or over an old one)."""
    path = note(name)
    path.write_text(text)
    return f"Wrote {len(text.encode())} bytes to {name}."


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False))
def delete_note(name: str) -> str:
    """Delete a note."""
    path = note(name)
    if not path.exists():
        raise ToolError(f"There is no note {name!r}.")
    path.unlink()
    return f"Deleted {name}."


@server.tool(annotations=READ_ONLY)
def fail(message: str = "it broke") -> str:
    """Always fails, with the message (a tool error, not a broken server)."""
    raise ToolError(message)


@server.tool(annotations=READ_ONLY)
def huge(size: int = 100_000) -> str:
    """Answer with `size` characters."""
    return "x" * max(0, min(size, 10_000_000))


@server.tool(annotations=READ_ONLY)
def picture() -> Image:
    """Answer with an image."""
    return Image(data=PIXEL, format="png")


class Title(BaseModel):
    title: str = Field(description="The title, put on the note's first line.")


def ask_title(name: str) -> Elicit[Title]:
    return Elicit(f"Which title should the note {name} get?", Title)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
def title_note(name: str, title: Annotated[Title, Resolve(ask_title)]) -> str:
    """Put a title on a note, asking the user which (an input request)."""
    path = note(name)
    body = path.read_text() if path.exists() else ""
    path.write_text(f"# {title.title}\n{body}")
    return f"Titled {name}: {title.title}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT instead of stdio")
    options = parser.parse_args()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
