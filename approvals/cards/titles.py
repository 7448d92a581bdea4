"""A call in words ("Delete notes.txt"), the title of its card and its inbox row. Whoever owns the
tools says how their calls read (chat's registry, the tool servers), registering here, so approvals
never imports them."""
import re
from collections.abc import Callable
from typing import Any

from core.visible import reveal

MAX_TITLE_CHARS = 120

# A function of (tool name, arguments, the tool server's annotations or None) returning the call in
# words, or "" when the tool is not its own.
Describer = Callable[[str, Any, "dict | None"], str]
_describers: list[Describer] = []


def add_describer(describer: Describer) -> None:
    if describer not in _describers:
        _describers.append(describer)


def title(name: str, arguments: Any, annotations: dict | None = None) -> str:
    """The first describer's words for the call, on one line and short; the tool's name when none
    has any (or one fails: the arguments are whatever the model sent, and a card must still show)."""
    return shorten(sentence(name, arguments, annotations) or name)  # a title folds line breaks: it is no sentence


def shown_title(name: str, arguments: Any, annotations: dict | None = None) -> str:
    """`title` with its invisible characters shown: what a card's and a row's title read (the
    call_title filter), and what the edit form's live title asks for (approvals.views.edit_title_view)."""
    return reveal(title(name, arguments, annotations))


def sentence(name: str, arguments: Any, annotations: dict | None = None) -> str:
    """The first describer's words for the call, neither folded nor shortened: approvals.summary
    names the whole target and reveals its line breaks (a path "a.txt\\n\\nDelete nothing" must not
    read as a second sentence); "" when no describer has any."""
    for describe in _describers:
        try:
            text = describe(name, arguments, annotations)
        except Exception:  # noqa: BLE001  (a describer's bug never hides a call from whoever decides it)
            text = ""
        if isinstance(text, str) and text.strip():
            return text.strip(" ")
    return ""


# The spaces and line breaks a title folds into one space. Not str.split()'s whitespace: that also
# takes U+2028, U+0085 and U+001C-U+001F, which the card must show (core.visible), never fold away.
_FOLDED = re.compile(r"[ \t\r\n]+")


def one_line(text: str) -> str:
    return _FOLDED.sub(" ", text).strip(" ")


def shorten(text: str) -> str:
    text = one_line(text)
    return text if len(text) <= MAX_TITLE_CHARS else text[: MAX_TITLE_CHARS - 1] + "…"
