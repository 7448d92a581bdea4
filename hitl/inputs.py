"""Reading untrusted input the same way on every surface: ids from forms, text a database can store."""
import re

MAX_ID = 2**63 - 1  # what a 64-bit primary key holds
_ID = re.compile(r"[0-9]{1,19}")  # ASCII digits only: "²".isdigit() is True, and int("²") fails
_SURROGATE = re.compile("[\ud800-\udfff]")


class BadInput(ValueError):
    """Input refused with a message the user can read."""


def parse_ids(values: list[str], *, most: int = 1000) -> list[int]:
    """Positive 64-bit ids from form values; anything else is refused as a whole."""
    if len(values) > most:
        raise BadInput(f"Select at most {most} at a time.")
    ids = []
    for value in values:
        if not _ID.fullmatch(value) or not 1 <= int(value) <= MAX_ID:
            raise BadInput(f"{value[:30]!r} is not an id.")
        ids.append(int(value))
    return ids


def is_storable(text: str) -> bool:
    """Whether a database can store `text`: no NUL (PostgreSQL refuses it) and no lone UTF-16
    surrogate (no UTF-8 encoding exists for one, so the database driver fails)."""
    return "\x00" not in text and not _SURROGATE.search(text)


def storable(text: str) -> str:
    """`text` as a column can hold it: NULs dropped, lone surrogates replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", ""))


def has_surrogate(value) -> bool:
    """Whether any string (keys too) of a JSON value holds a lone UTF-16 surrogate: "\\ud800" is
    valid JSON syntax, but no text a database can store."""
    if isinstance(value, str):
        return bool(_SURROGATE.search(value))
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_surrogate(item) for item in value)
    return False
