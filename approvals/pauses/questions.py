"""A question the agent asks a human: what it may be, what counts as its answer, and what the model
reads back. Pure: no database. The stored question is
`{"text", "type", "options", "min", "max", "default", "required"}`, and a confirmation's (the Swift
design's ConfirmationRequest) `"details", "confirm_label", "cancel_label"`: what to know first and
the words of its two buttons (one stored before them says Yes and No: `labels`); a file question's
(the Swift design's InputType.file) `"accept", "max_bytes"`: the types it takes and its size limit.
A file is answered on the site only: its card uploads it (approvals.pauses.uploads), which makes the
StoredFile that is the only answer validate_answer takes; any other surface is told so."""
import json
import math
import re
from dataclasses import dataclass
from datetime import date

from core.inputs import is_storable

TYPES = ("text", "choice", "multi_choice", "number", "date", "confirm", "file")
MIN_OPTIONS, MAX_OPTIONS = 2, 20
MAX_QUESTION_CHARS = 2000
MAX_OPTION_CHARS = 200
MAX_TEXT_ANSWER_CHARS = 5000
MAX_LABEL_CHARS = 40  # a button's words
DEFAULT_LABELS = ("Yes", "No")
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
YES = {"yes", "y", "true", "ok", "confirm", "confirmed"}
NO = {"no", "n", "false", "deny", "denied"}
MAX_ACCEPT = 20  # a file question's accepted types
ACCEPTED = re.compile(r"\.[a-z0-9][a-z0-9.+_-]{0,30}|[a-z]+/(\*|[a-z0-9][a-z0-9.+_-]{0,100})")  # ".csv", "text/csv", "image/*"
ON_THE_SITE = "This question takes a file: upload it on its card, on the site."


@dataclass(frozen=True)
class StoredFile:
    """A file a person uploaded on a file question's card, stored in the conversation's sandbox
    (approvals.pauses.uploads): the only answer a file question takes."""

    approval_id: int  # the question it was uploaded for
    path: str  # in the sandbox: "uploads/report.csv"
    size: int
    name: str  # as the person's file was named
    content_type: str

    def as_answer(self) -> dict:
        return {"path": self.path, "size": self.size, "name": self.name, "content_type": self.content_type}


class InvalidQuestion(ValueError):
    """Arguments the question's type does not allow; the message names the field, for the model."""


class InvalidAnswer(ValueError):
    """An answer the question does not take; the message says why, for the human."""


def normalize(arguments: dict, *, most_file_bytes: int = 10 * 1024 * 1024) -> dict:
    """The model's (schema-validated) arguments as the stored question, or InvalidQuestion. A file
    question's `max_bytes` is at most `most_file_bytes` (HITL_MAX_UPLOAD_BYTES), and that when not given."""
    text = str(arguments.get("question") or arguments.get("message") or "").strip()  # "message": the Swift design's word
    if not text:
        raise InvalidQuestion("question: the question is empty.")
    if len(text) > MAX_QUESTION_CHARS:
        raise InvalidQuestion(f"question: longer than {MAX_QUESTION_CHARS} characters.")
    kind = arguments.get("type") or "text"
    if kind not in TYPES:
        raise InvalidQuestion(f"type: one of {', '.join(TYPES)}.")
    question = {
        "text": text,
        "type": kind,
        "options": _options(kind, arguments.get("options")),
        "min": None,
        "max": None,
        "default": None,
        "required": bool(arguments.get("required", True)),
        **_confirmation(kind, arguments),
        **_file(kind, arguments, most_file_bytes),
    }
    low, high = arguments.get("min"), arguments.get("max")
    if kind == "number":
        question["min"], question["max"] = _bound("min", low), _bound("max", high)
        if question["min"] is not None and question["max"] is not None and question["min"] > question["max"]:
            raise InvalidQuestion(f"min: {question['min']} is greater than max {question['max']}.")
    elif low is not None or high is not None:
        raise InvalidQuestion(f"min, max: only a number question has bounds, not a {kind} question.")
    if arguments.get("default") is not None:
        try:
            question["default"] = validate_answer(question, arguments["default"])
        except InvalidAnswer as exc:
            raise InvalidQuestion(f"default: {exc}") from None
    return question


def _confirmation(kind: str, arguments: dict) -> dict:
    """A confirmation's details and the words of its buttons ("Delete" / "Go back"); nothing for
    the other types, which refuse them."""
    given = [name for name in ("details", "confirm_label", "cancel_label") if arguments.get(name) not in (None, "")]
    if kind != "confirm":
        if given:
            raise InvalidQuestion(f"{', '.join(given)}: only a confirm question has them, not a {kind} question.")
        return {}
    details = str(arguments.get("details") or "").strip()
    if len(details) > MAX_QUESTION_CHARS:
        raise InvalidQuestion(f"details: longer than {MAX_QUESTION_CHARS} characters.")
    words = []
    for name, default in zip(("confirm_label", "cancel_label"), DEFAULT_LABELS):
        label = " ".join(str(arguments.get(name) or default).split())
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidQuestion(f"{name}: longer than {MAX_LABEL_CHARS} characters.")
        words.append(label)
    if words[0].casefold() == words[1].casefold():
        raise InvalidQuestion("confirm_label, cancel_label: the two buttons say the same.")
    return {"details": details, "confirm_label": words[0], "cancel_label": words[1]}


def _file(kind: str, arguments: dict, most: int) -> dict:
    """A file question's accepted types (MIME types or extensions, as a browser's `accept` has
    them; none: any file) and size limit, at most `most`; nothing for the other types, which refuse them."""
    given = [name for name in ("accept", "max_bytes") if arguments.get(name) not in (None, "", [])]
    if kind != "file":
        if given:
            raise InvalidQuestion(f"{', '.join(given)}: only a file question has them, not a {kind} question.")
        return {}
    accept = arguments.get("accept") or []
    if isinstance(accept, str):
        accept = [part for part in accept.split(",")]
    if not isinstance(accept, list) or len(accept) > MAX_ACCEPT:
        raise InvalidQuestion(f"accept: a list of at most {MAX_ACCEPT} MIME types or extensions, e.g. [\".csv\", \"text/csv\"].")
    cleaned = []
    for entry in accept:
        entry = str(entry).strip().lower()
        if not ACCEPTED.fullmatch(entry):
            raise InvalidQuestion(f"accept: {entry[:40]!r} is not a MIME type (\"text/csv\", \"image/*\") or an extension (\".csv\").")
        if entry not in cleaned:
            cleaned.append(entry)
    size = arguments.get("max_bytes")
    if size is None:
        size = most
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise InvalidQuestion("max_bytes: a whole number of bytes, at least 1.")
    return {"accept": cleaned, "max_bytes": min(size, most)}


def accepts(question: dict, name: str, content_type: str) -> bool:
    """Whether a file named `name`, of `content_type` (as the server guesses it from the name),
    is of a type the question takes: an extension the name ends with, or its MIME type (or family)."""
    accept = question.get("accept") or []
    if not accept:
        return True
    name, content_type = name.lower(), (content_type or "").lower()
    for entry in accept:
        if entry.startswith(".") and name.endswith(entry):
            return True
        if entry.endswith("/*") and content_type.startswith(entry[:-1]):
            return True
        if entry == content_type:
            return True
    return False


def labels(question: dict) -> tuple[str, str]:
    """The words of a confirmation's two buttons: its own, or Yes and No."""
    return (question.get("confirm_label") or DEFAULT_LABELS[0], question.get("cancel_label") or DEFAULT_LABELS[1])


def as_shown(question: dict | None) -> dict | None:
    """The stored question with its confirmation's words filled in (Yes and No for one stored
    before they were kept), as the API shows it."""
    if not question or question.get("type") != "confirm":
        return question
    yes, no = labels(question)
    return {"details": "", **question, "confirm_label": yes, "cancel_label": no}


def _options(kind: str, options) -> list[str]:
    if kind not in ("choice", "multi_choice"):
        if options:
            raise InvalidQuestion(f"options: only a choice question has options, not a {kind} question.")
        return []
    cleaned = [str(option).strip() for option in options or []]
    if not MIN_OPTIONS <= len(cleaned) <= MAX_OPTIONS:
        raise InvalidQuestion(f"options: a {kind} question needs {MIN_OPTIONS} to {MAX_OPTIONS} options, not {len(cleaned)}.")
    if any(not option for option in cleaned):
        raise InvalidQuestion("options: an option is empty.")
    if any(len(option) > MAX_OPTION_CHARS for option in cleaned):
        raise InvalidQuestion(f"options: an option is longer than {MAX_OPTION_CHARS} characters.")
    if len({option.casefold() for option in cleaned}) != len(cleaned):
        raise InvalidQuestion("options: two options are the same.")
    return cleaned


def _bound(name: str, value) -> int | float | None:
    if value is None:
        return None
    number = _number(value)
    if number is None:
        raise InvalidQuestion(f"{name}: not a number.")
    return number


def _number(value) -> int | float | None:
    """A finite number from a JSON number or its text; None if it is not one (booleans are not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().replace(",", "")) if value.strip() else None
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def validate_answer(question: dict, value):
    """The answer as stored, or InvalidAnswer saying why (the question stays open)."""
    kind = question["type"]
    if any(isinstance(v, str) and not is_storable(v) for v in (value if isinstance(value, list) else [value])):
        raise InvalidAnswer("The answer contains a NUL character or a lone UTF-16 surrogate, which is not text.")
    if kind == "text":
        if not isinstance(value, str):
            raise InvalidAnswer("Answer with text.")
        value = value.strip()
        if not value and question["required"]:
            raise InvalidAnswer("An answer is required.")
        if len(value) > MAX_TEXT_ANSWER_CHARS:
            raise InvalidAnswer(f"The answer is longer than {MAX_TEXT_ANSWER_CHARS} characters.")
        return value
    if kind == "choice":
        if not isinstance(value, str) or value not in question["options"]:
            raise InvalidAnswer(f"Choose one of: {', '.join(question['options'])}.")
        return value
    if kind == "multi_choice":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidAnswer("Answer with a list of options.")
        unknown = [v for v in value if v not in question["options"]]
        if unknown:
            raise InvalidAnswer(f"{unknown[0]!r} is not an option; choose from: {', '.join(question['options'])}.")
        if len(set(value)) != len(value):
            raise InvalidAnswer("An option is chosen twice.")
        if not value and question["required"]:
            raise InvalidAnswer("Choose at least one option.")
        return [option for option in question["options"] if option in value]  # in the question's order
    if kind == "number":
        number = _number(value)
        if number is None:
            raise InvalidAnswer("Answer with a number.")
        low, high = question["min"], question["max"]
        if (low is not None and number < low) or (high is not None and number > high):
            raise InvalidAnswer(f"Answer with a number {_range(low, high)}.")
        return number
    if kind == "date":
        if not isinstance(value, str) or not DATE.fullmatch(value.strip()):
            raise InvalidAnswer("Answer with a date as YYYY-MM-DD.")
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            raise InvalidAnswer(f"{value.strip()} is not a date.") from None
    if kind == "confirm":
        if not isinstance(value, bool):
            raise InvalidAnswer("Answer with yes (true) or no (false).")
        return value
    if kind == "file":
        if not isinstance(value, StoredFile):
            raise InvalidAnswer(ON_THE_SITE)
        return value.as_answer()
    raise InvalidAnswer(f"Unknown question type {kind!r}.")


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"of at least {low}" if low is not None else f"of at most {high}"


def from_text(question: dict, text: str):
    """What a typed reply (the chat's message box) means as an answer to the question: a number,
    options separated by commas or "and", yes or no. Validate the result with validate_answer."""
    text = text.strip()
    kind = question["type"]
    if kind == "choice":
        return _option_named(question, text) or text
    if kind == "multi_choice":
        parts = [p for p in re.split(r"\s*(?:,|;|\band\b)\s*", text, flags=re.I) if p]
        return [_option_named(question, part) or part for part in parts]
    if kind == "confirm":
        word = text.lower().strip(" .!")
        yes, no = (label.casefold() for label in labels(question))
        return True if word in YES or word == yes else False if word in NO or word == no else text
    if kind == "number":
        number = _number(text)
        return text if number is None else number
    return text


def from_form(question: dict, form) -> object:
    """What a card's form posted as an answer of the question's type (a QueryDict): several ticked
    options, a number's text, true or false. Validate the result with validate_answer."""
    kind = question["type"]
    if kind == "multi_choice":
        return form.getlist("answer")
    value = form.get("answer", "")
    if kind == "confirm":
        return {"true": True, "false": False}.get(value, value)
    if kind == "number":
        number = _number(value)
        return value if number is None else number
    return value


def _option_named(question: dict, text: str) -> str | None:
    """The option the text names: itself (in any case), or its number in the list."""
    for option in question["options"]:
        if option.casefold() == text.casefold():
            return option
    if text.isdigit() and 1 <= int(text) <= len(question["options"]):
        return question["options"][int(text) - 1]
    return None


def option_at(question: dict, index: int):
    """The answer a button at `index` gives (a channel's buttons carry the option's place, not its
    text): yes or no for a confirm question, else that option; InvalidAnswer for any other place."""
    if question["type"] == "confirm":
        return index == 0
    options = question.get("options") or []
    if not 0 <= index < len(options):
        raise InvalidAnswer("That is not one of the options.")
    return options[index]


def shown(answer) -> str:
    """An answer as a person reads it: a list joined, yes or no for a confirmation."""
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    if isinstance(answer, list):
        return ", ".join(answer) if answer else "(none)"
    if isinstance(answer, dict) and {"path", "size"} <= set(answer):
        return f"{answer.get('name') or answer['path']} ({answer['size']} bytes), stored as {answer['path']}"
    return str(answer)


def answered_result(answer) -> str:
    """The tool result the model reads: the answer as JSON, then a sentence."""
    return f"{json.dumps({'answer': answer}, ensure_ascii=False)}\nThe human answered: {shown(answer)}."


def declined_result(who: str, reason: str) -> str:
    because = f": {reason.rstrip('.')}" if reason else ""
    return f"{json.dumps({'declined': True, 'reason': reason}, ensure_ascii=False)}\n{who} declined to answer{because}."


def expired_result() -> str:
    return f"{json.dumps({'answered': False})}\nNo answer came: the question expired unanswered."
