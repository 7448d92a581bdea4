"""A tool server's call in words, the title of its card: the tool's title as its server gives it
(else its name, readably) and the arguments that say what it acts on ("Git commit: Second commit").
A server's title is only its claim ("Read a file" for a tool that deletes): the tool that runs is
named after it ("Read a file (files__delete): a.txt"), so no title hides which tool a person approves."""
from typing import Any

from approvals.cards.titles import one_line

from .specs import SEPARATOR

# The arguments that say what a call acts on, in the order to look for them; others follow if short.
KEY_ARGUMENTS = ("path", "name", "file", "to", "url", "message", "title", "query", "branch", "target")
MAX_SHOWN = 2
MAX_VALUE_CHARS = 60
# A server's own title kept short, so the card's title still reaches the arguments it acts on.
MAX_TOOL_TITLE_CHARS = 50


def short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def describe_call(name: str, arguments: Any, annotations: dict | None = None) -> str:
    """"" for a tool not from a server (its name has no `<server>__`)."""
    server, separator, tool = name.partition(SEPARATOR)
    if not (server and separator and tool):
        return ""
    given = (annotations or {}).get("title") if isinstance(annotations, dict) else None
    given = one_line(given) if isinstance(given, str) else ""
    if given:  # the server's claim, then the tool that runs
        title = f"{short(given, MAX_TOOL_TITLE_CHARS)} ({name})"
    else:
        title = short(tool.replace("_", " ").strip().capitalize(), MAX_TOOL_TITLE_CHARS)
    shown = key_values(arguments) if isinstance(arguments, dict) else []
    return f"{title}: {', '.join(shown)}" if shown else title


def key_values(arguments: dict) -> list[str]:
    """Up to MAX_SHOWN short values: the key arguments first, then any other short text or number."""
    ordered = [key for key in KEY_ARGUMENTS if key in arguments] + [key for key in arguments if key not in KEY_ARGUMENTS]
    shown = []
    for key in ordered:
        value = arguments[key]
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            continue
        # Not folded onto one line: approvals.summary reveals a value's line breaks (a card's
        # title folds them), so "a.txt\\n\\nDelete nothing" never reads as a second sentence.
        text = str(value).strip(" ")
        if text.strip() and (len(one_line(text)) <= MAX_VALUE_CHARS or key in KEY_ARGUMENTS):
            shown.append(short(text, MAX_VALUE_CHARS))
        if len(shown) == MAX_SHOWN:
            break
    return shown
