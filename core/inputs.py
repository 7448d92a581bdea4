"""Reading untrusted input the same way on every surface: ids from forms, text a database can store."""
import json
import re

MAX_ID = 2**63 - 1  # what a 64-bit primary key holds
_ID = re.compile(r"[0-9]{1,19}")  # ASCII digits only: "²".isdigit() is True, and int("²") fails
_SURROGATE = re.compile("[\ud800-\udfff]")
_VERSION = re.compile(r"[0-9a-f]{0,64}")  # Approval.shown_hash: a sha256 in hex


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


def parse_shown(values: list[str], *, most: int = 1000) -> dict[int, str]:
    """What a page listed for a decision on several approvals: "<id>:<version shown>" each (a bare
    id states no version), as approvals.services.decide_many() takes them; anything else is refused
    as a whole."""
    shown = {}
    for value in values:
        approval_id, _, version = value.partition(":")
        if not _VERSION.fullmatch(version):
            raise BadInput(f"{value[:30]!r} is not an approval as a page shows it.")
        shown[parse_ids([approval_id])[0]] = version
    if len(shown) > most:
        raise BadInput(f"Select at most {most} at a time.")
    return shown


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


def is_storable_value(value) -> bool:
    """Whether every string (keys too) of a JSON value is text a database can store (is_storable)."""
    if isinstance(value, str):
        return is_storable(value)
    if isinstance(value, dict):
        return all(is_storable_value(k) and is_storable_value(v) for k, v in value.items())
    if isinstance(value, list):
        return all(is_storable_value(item) for item in value)
    return True


MAX_JSON_DEPTH = 64  # deeper than any body a route of ours reads; far below the parser's recursion limit


# What parse_json refuses in a body's text: NULs and lone surrogates (no database stores either);
# surrogates only (the route refuses a NUL itself, naming the field); or nothing (the route cleans
# what a person typed, as a reject reason from a notification, and keeps the rest).
STORABLE, NO_SURROGATES, ANY_TEXT = "storable", "no surrogates", "any"


def parse_json(raw: bytes | str, *, most_bytes: int, most_depth: int = MAX_JSON_DEPTH, text: str = STORABLE):
    """A request body as JSON, or BadInput saying why not, for every JSON route outside django-ninja
    (and its parser): too large, not JSON (or NaN/Infinity, which JSON has not), nested deeper than
    `most_depth`, or holding text that `text` refuses."""
    if len(raw) > most_bytes:
        raise BadInput(f"The body is larger than {most_bytes:,} bytes.")
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[[[[…" past the parser's own depth
        raise BadInput("The body is not JSON.") from None
    refuse_unstorable(value, most_depth=most_depth, text=text)
    return value


def refuse_unstorable(value, *, most_depth: int = MAX_JSON_DEPTH, text: str = STORABLE) -> None:
    """BadInput if a parsed JSON value nests deeper than `most_depth` or holds text no database
    stores; walked without recursion, so no depth of nesting can crash the check itself."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > most_depth:
                raise BadInput(f"The body nests deeper than {most_depth} levels.")
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str) and text != ANY_TEXT and (_SURROGATE.search(item) or (text == STORABLE and "\x00" in item)):
            raise BadInput("The body holds a NUL or a lone UTF-16 surrogate, which is not text.")


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")
