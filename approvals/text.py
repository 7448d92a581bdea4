"""Reading a typed reply as a decision about pending calls: approve, reject (with its reason as typed),
ambiguous, or not a decision at all, with the number of calls the reply says it decides. Pure: the
caller compares that number with the calls pending, so nothing is decided that could be misread."""
import re
from dataclasses import dataclass
from enum import Enum


class Intent(Enum):
    APPROVE = "approve"
    REJECT = "reject"
    AMBIGUOUS = "ambiguous"  # reads as an answer, but not as one clear decision: it decides nothing
    NONE = "none"  # not an answer to the pending calls at all


@dataclass(frozen=True)
class TextDecision:
    intent: Intent
    reason: str = ""
    """What followed "because", "since", "as", "reason:" or ":", in the user's own case and punctuation."""
    count: int | None = None
    """How many calls the reply says it decides ("approve all 3" -> 3), as stated even when 0 or huge;
    None when it states no number ("yes", "approve all"), which can decide only a single pending call."""


# The words decisions are made of: lower case, one space between the words of a phrase.
_APPROVALS = (
    "yes", "y", "yep", "yeah", "yup", "ok", "okay", "sure", "approve", "approved", "confirm", "confirmed",
    "lgtm", "go ahead", "do it", "please do", "proceed",
)
# "cancel": kagent's reply to a pause it will not approve (its UI's Cancel), a rejection.
_REJECTIONS = ("no", "n", "nope", "nah", "reject", "rejected", "deny", "denied", "cancel", "cancelled", "canceled")
_COURTESIES = ("please", "thanks", "thank you")
# An acknowledgement of what the agent said is no decision: "ok thanks", "cool", "sure, thx". A weak
# yes with thanks is read as one; a strong word ("yes", "approve", "go ahead") with thanks still decides.
_PLEASED = ("cool", "great", "nice", "alright", "got it", "noted", "fine")  # no approval word: pleased, not deciding
_WEAK = ("ok", "okay", "k", "kk", "sure", "yeah", "yep", "yup") + _PLEASED
_GRATITUDE = ("thanks", "thank you", "thx", "ty", "cheers", "many thanks")
_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}
# A reason that opens with these takes its "no" back ("no: go ahead", "no because that's fine") or
# turns it into a partial answer ("no: just a.txt").
_AFFIRMATIONS = (
    "go ahead", "do it", "please do", "proceed", "fine", "problem", "worries", "sure", "ok", "okay", "yes",
    "approve", "good", "mind",
)
_EXCEPTIONS = ("but", "except", "only", "just", "instead", "apart", "besides", "unless")
# Any of these anywhere in an approval's reason makes it conditional. Approvals are held to more than
# rejections because a misread approval runs a tool; a misread rejection only asks the model again.
_HEDGES = _EXCEPTIONS + ("not", "don't", "dont", "never", "if", "skip", "leave")

_WORD_END = r"(?![\w'])"  # so "no" does not start "nothing" and "do" does not start "don't"


def _one_of(phrases) -> str:
    return "(?:" + "|".join(map(re.escape, phrases)) + ")" + _WORD_END


# The reason starts at the first of these, or at a ":". "as well", "as long as", "as soon as" and "as if"
# are conditions, not reasons, and a bare "reason" is none either ("no reason to wait" means yes):
# they stay in the head, where they make the reply ambiguous.
_REASON_WORDS = ("because", "since", r"as(?! (?:well|long|soon|if)\b)", "reason(?=:)", "reason is", "reason being")
_REASON_MARK = re.compile(rf"(?::|\b(?:{'|'.join(_REASON_WORDS)})\b)[\s:,]*", re.I)
# Spelling that does not change a decision: case, ’ for ', and runs of punctuation, which become one space.
_PUNCTUATION = re.compile(r"[\s,.!;:\"“”–—-]+")
# The first word says which way the reply leans. "not" ("not at all, go ahead") leans both ways.
_LEAD = re.compile(rf"(?:please )?(?P<word>{_one_of(_APPROVALS + _REJECTIONS + ('not',))})")
# "all 3", "to all three", "all 2 of them", "both"; "all" alone states no number.
_NUMBER = rf"[0-9]+|{_one_of(_NUMBERS)}"
_COUNT = rf"(?: (?:to )?(?:(?:them )?all(?: (?P<count>{_NUMBER}))?|(?P<both>both))(?: of them| calls?)?)?"


def _head(words) -> re.Pattern:
    """The whole of a clear decision before its reason: its words, an optional count, courtesies.
    The three parts share no words, so a failed match gives up quickly even on a long message."""
    return re.compile(rf"(?:please )?{_one_of(words)}(?: {_one_of(words)})*{_COUNT}(?: {_one_of(_COURTESIES)})*")


_APPROVAL = _head(_APPROVALS)
_WEAK_ONLY = re.compile(rf"{_one_of(_WEAK)}(?: {_one_of(_WEAK)})*")
_ACKNOWLEDGEMENT = re.compile(
    rf"(?:{_one_of(_WEAK)} )*{_one_of(_GRATITUDE + _PLEASED)}(?: {_one_of(_WEAK + _GRATITUDE)})*"
)
_REJECTION = _head(_REJECTIONS)
_TAKES_BACK = re.compile(rf"(?:(?:that|it)(?:'s| is) )?{_one_of(_AFFIRMATIONS + _EXCEPTIONS)}")
_HEDGE = re.compile(rf"\b{_one_of(_HEDGES)}")


def parse_decision(text: str) -> TextDecision:
    """Read a reply as a decision. "yes", "no because <reason>": a decision with no count, for one
    pending call. "approve all 3", "reject all 2: <reason>": a decision about the 3 (or 2) calls it
    states. Anything beside the decision ("no problem", "yes but not b.txt", "approve all 3 but not
    b.txt") makes it ambiguous; a reply that does not open with a decision word is not one at all."""
    text = " ".join(text.split())
    head, reason = text, ""
    if mark := _REASON_MARK.search(text):
        head, reason = text[: mark.start()], text[mark.end() :].strip()
    words = _canonical(head)
    if not reason and _ACKNOWLEDGEMENT.fullmatch(words):
        return TextDecision(Intent.NONE)
    if reason and _WEAK_ONLY.fullmatch(words) and (not re.search(r"\w", reason) or _ACKNOWLEDGEMENT.fullmatch(_canonical(reason))):
        return TextDecision(Intent.NONE)  # "ok :)", "sure: thanks", "ok: noted": an acknowledgement
    lead = _LEAD.match(words)
    if not lead:
        return TextDecision(Intent.NONE)
    if lead["word"] in _APPROVALS:
        intent, clear = Intent.APPROVE, _APPROVAL.fullmatch(words)
        if _HEDGE.search(_canonical(reason)):
            return TextDecision(Intent.AMBIGUOUS)
    elif lead["word"] in _REJECTIONS:
        intent, clear = Intent.REJECT, _REJECTION.fullmatch(words)
        if _TAKES_BACK.match(_canonical(reason)):
            return TextDecision(Intent.AMBIGUOUS)
    else:
        return TextDecision(Intent.AMBIGUOUS)
    if not clear:  # "no problem", "nah, do it", "approve the first one": more than a decision
        return TextDecision(Intent.AMBIGUOUS)
    try:
        count = _stated_count(clear)
    except ValueError:  # past int()'s 4,300-digit limit: no count anyone means, and none to guess
        return TextDecision(Intent.AMBIGUOUS)
    return TextDecision(intent, reason, count)


def _stated_count(clear: re.Match) -> int | None:
    if clear["both"]:
        return 2
    if clear["count"] in _NUMBERS:
        return _NUMBERS[clear["count"]]
    return None if clear["count"] is None else int(clear["count"])


def _canonical(text: str) -> str:
    return _PUNCTUATION.sub(" ", text.lower().replace("’", "'")).strip()
