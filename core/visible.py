"""What you see is what runs: invisible and direction-changing characters shown as ⟨U+202E⟩.

Pure: no Django. Used by the policy (such arguments raise the risk) and by every place that shows
arguments, previews, reasons or tool names to a human.
"""
import json
import re
import unicodedata
from typing import Any

# Categories whose characters draw nothing or rearrange what is drawn: format characters (bidi
# controls, zero-width joiners, the BOM, soft hyphen, tag characters), controls, lone surrogates,
# and the line and paragraph separators that break a line without looking like a newline.
_HIDDEN_CATEGORIES = {"Cf", "Cc", "Cs", "Zl", "Zp"}

# Newlines and tabs are what they look like, so text keeps its shape.
_SHOWN_CONTROLS = {"\n", "\r", "\t"}

# Letters and marks that render as nothing: Hangul fillers, the combining grapheme joiner, Khmer
# inherent vowels, Mongolian variation selectors, the variation selectors, and the whole tag block
# (some of its code points are still unassigned, so no category would catch them).
_INVISIBLE_RANGES = [
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0000, 0xE007F),
    (0xE0100, 0xE01EF),
]

# Format characters live only in the Basic and Supplementary Multilingual planes and in plane 14,
# so scanning those (not all 1.1 million code points) finds them all, in a few milliseconds.
_SCANNED = [range(0x0000, 0x20000), range(0xE0000, 0xE1000)]


def _hidden_code_points() -> list[int]:
    found = {cp for block in _SCANNED for cp in block if unicodedata.category(chr(cp)) in _HIDDEN_CATEGORIES}
    found.update(cp for first, last in _INVISIBLE_RANGES for cp in range(first, last + 1))
    found.difference_update(ord(c) for c in _SHOWN_CONTROLS)
    return sorted(found)


def _character_class(code_points: list[int]) -> str:
    """Consecutive code points as ranges, so the class stays short and the regex fast."""
    parts, start = [], None
    for index, cp in enumerate(code_points):
        if start is None:
            start = cp
        if index + 1 == len(code_points) or code_points[index + 1] != cp + 1:
            parts.append(f"\\U{start:08x}" if start == cp else f"\\U{start:08x}-\\U{cp:08x}")
            start = None
    return "[" + "".join(parts) + "]"


_HIDDEN = re.compile(_character_class(_hidden_code_points()))


def _shown(match: re.Match) -> str:
    return f"⟨U+{ord(match[0]):04X}⟩"


def reveal(text: str) -> str:
    """`text` with each invisible or direction-changing character written as ⟨U+XXXX⟩.

    The result holds none of them, so revealing it again changes nothing."""
    return _HIDDEN.sub(_shown, text)


def hidden_as_any(text: str) -> str:
    """`text` with each invisible character replaced by `?`: a glob that shows what it matches."""
    return _HIDDEN.sub("?", text)


def reveal_line(text: str) -> str:
    """Like `reveal`, for a value that should be one line (an address, a subject): its newlines and
    tabs are revealed too, so "Subject: hi\\nBcc: x" cannot pass for two headers."""
    return reveal(text).replace("\r", "⟨U+000D⟩").replace("\n", "⟨U+000A⟩").replace("\t", "⟨U+0009⟩")


def has_invisible(value: Any) -> bool:
    """Whether a string, or any key or value inside dicts, lists and tuples, holds such a character."""
    if isinstance(value, str):
        return _HIDDEN.search(value) is not None
    if isinstance(value, dict):
        return any(has_invisible(key) or has_invisible(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(has_invisible(item) for item in value)
    return False


def reveal_json(value: Any) -> str:
    """Arguments as indented JSON with invisible characters revealed, for showing to a human."""
    return reveal(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))
