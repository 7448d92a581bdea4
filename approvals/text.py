"""Reading a typed reply as a decision: a clear yes, a clear no (with a reason), ambiguous, or neither."""
import re
from dataclasses import dataclass
from enum import Enum


class Intent(Enum):
    APPROVE = "approve"
    REJECT = "reject"
    AMBIGUOUS = "ambiguous"
    NONE = "none"


@dataclass(frozen=True)
class TextDecision:
    intent: Intent
    reason: str = ""


_YES = r"yes|y|yep|yeah|yup|approve|approved|approve all|ok|okay|sure|go ahead|do it|confirm|confirmed|lgtm"
_NO = r"no|n|nope|nah|reject|rejected|reject all|deny|denied"
_POLITE = r"(please|all|to all|all of them|them all|go ahead|do it|thanks|thank you)"
_FILLER = rf"{_POLITE}([ ,.!]+{_POLITE})*"
# Words that make a yes or no conditional, so it no longer decides every pending call the same way.
_HEDGES = re.compile(r"\b(but|except|only|unless|not|apart|besides|instead|yes|approve|first|just)\b", re.I)


def parse_decision(text: str) -> TextDecision:
    """"yes" / "approve all" approve; "no" / "no, because <reason>" reject; "yes but not b.txt" is
    ambiguous (it decides nothing); anything else is not a decision at all."""
    text = " ".join(text.split())
    if m := re.fullmatch(rf"({_YES})\b(.*)", text, re.I):
        rest = m[2].strip(" ,.!;:-")
        if not rest or re.fullmatch(_FILLER, rest, re.I):
            return TextDecision(Intent.APPROVE)
        return TextDecision(Intent.AMBIGUOUS)
    if m := re.fullmatch(rf"({_NO})\b(.*)", text, re.I):
        rest = m[2].strip(" ,.!;:-")
        if because := re.match(r"(because|since|as|reason)\b[\s:,-]*", rest, re.I):
            return TextDecision(Intent.REJECT, rest[because.end() :].strip())
        if _HEDGES.search(rest):  # "no, just a.txt": not the same answer for every call
            return TextDecision(Intent.AMBIGUOUS)
        return TextDecision(Intent.REJECT, rest)
    return TextDecision(Intent.NONE)
