"""One summary of a pending call, made once and rendered by every surface: in words what Approve
will do ("Write setup.sh (87 bytes)", "Fetch https://attacker.test/x?y=1"), who asked, for which
agent, why, and the whole details (every argument and the preview) with whether they fit a
channel's space. A channel renders it with its own markup; none builds its own, and a channel
that cannot show the details whole sends the call as cut (`complete` False), which can reject but
never approve (approvals.services.decide).

Every text is shown with its invisible and direction-changing characters revealed (core.visible);
markup is the renderer's to escape."""
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.visible import reveal, reveal_json, reveal_line

from .cards import titles
from .models import Approval
from .policy import timeouts

# The most a sentence says on one line: a longer target (a URL of 3,000 characters) is cut, and a
# summary with a cut sentence never fits anywhere (its details say the rest).
MAX_SENTENCE_CHARS = 600
MAX_VALUE_CHARS = 80  # an argument's value in a sentence that names the call's arguments

# Gate reasons that only say a call was gated ("Demo agent needs approval for write_file."): the
# sentence and the risk already say as much.
ROUTINE_REASON = re.compile(r"^(\S+ always needs approval \(\w+ risk\)\.|.+? needs approval for (every tool call|\S+( on \S+)?)\.)\s*")


@dataclass(frozen=True)
class Summary:
    sentence: str  # what Approve does, naming its target, on one line
    sentence_whole: bool  # False when the sentence itself was cut to MAX_SENTENCE_CHARS
    requester: str  # the requesting user's username
    asked_by: str  # "demo (Demo agent)", or an outside caller's words for who asked
    agent: str
    why: str  # never empty, never only the tool's name
    risk: str
    kind: str
    expires_at: datetime | None
    shown_hash: str
    arguments: str  # the whole arguments shown (the edited ones after an edit), as revealed JSON
    preview: str  # the whole preview's text, revealed ("" when the tool has none)
    timeout_action: str = timeouts.EXPIRE  # what its deadline does if no one decides

    @property
    def at_deadline(self) -> str:
        """What the deadline does, said before its time: "Expires", "Rejected" or "Approved"."""
        return timeouts.described(self.timeout_action)

    @property
    def unless(self) -> str:
        """Said after the deadline's time when it decides: " if no one decides"."""
        return "" if self.timeout_action == timeouts.EXPIRE else " if no one decides"

    @property
    def head(self) -> str:
        """The one line a person reads first: "Approve? Write setup.sh (87 bytes) — asked by demo (Demo agent)"."""
        if self.kind == Approval.Kind.QUESTION:  # the sentence asks already
            return f"{self.sentence} — asked by {self.asked_by}"
        return f"Approve? {self.sentence} — asked by {self.asked_by}"

    @property
    def details(self) -> str:
        """Everything Approve decides, as plain text: the preview, then the arguments."""
        parts = [f"Preview:\n{self.preview}"] if self.preview else []
        return "\n\n".join([*parts, f"Arguments:\n{self.arguments}"])

    def fits(self, limit: int, measure: Callable[[str], int] = len) -> bool:
        """Whether the sentence and the whole details fit in `limit`: a channel that has that much
        room shows the whole call, and only then may its message approve. A cut sentence never fits.

        `limit` counts what `measure` counts: characters (code points, as Slack counts) by default;
        pass `utf16_units` for Telegram (which counts UTF-16 code units: an emoji is two) and
        `utf8_bytes` for a byte limit. It is the room left for these two texts only: a channel
        takes off what else its message holds (the head, labels, its markup, any escaping or JSON
        that grows the text) first, or measures the message it will send."""
        return self.sentence_whole and measure(self.sentence) + measure(self.details) <= limit

    def as_json(self) -> dict:
        """The API's `summary`."""
        return {"sentence": self.sentence, "requester": self.requester, "agent": self.agent, "why": self.why}


def summarize(approval: Approval) -> Summary:
    """The summary of `approval` as it stands (the call, conversation, agent and requester are read:
    load them with it)."""
    call, conversation = approval.tool_call, approval.conversation
    agent = conversation.agent.name
    requester = approval.requested_by.get_username()
    arguments = approval.edited_arguments if approval.is_edited else call.arguments
    sentence, whole = _cut(reveal_line(_sentence(approval, call.name, arguments, agent)))
    preview = ""
    if isinstance(approval.preview, dict) and str(approval.preview.get("text") or "").strip():
        preview = reveal(str(approval.preview["text"]))
    return Summary(
        sentence=sentence,
        sentence_whole=whole,
        requester=requester,
        asked_by=reveal_line(_asked_by(conversation, requester, agent)),
        agent=reveal_line(agent),
        why=reveal_line(why(approval, agent)),
        risk=approval.risk,
        kind=approval.kind,
        expires_at=approval.expires_at,
        shown_hash=approval.shown_hash,
        arguments=reveal_json(arguments),
        preview=preview,
        timeout_action=approval.timeout_action,
    )


def _sentence(approval: Approval, name: str, arguments: Any, agent: str) -> str:
    if approval.kind == Approval.Kind.QUESTION:
        return f"Answer {agent}'s question: {(approval.question or {}).get('text', '')}"
    if approval.kind == Approval.Kind.PLAN:
        plan = approval.plan or {}
        steps = len(plan.get("steps") or [])
        return f"Follow the plan “{plan.get('title', '')}” ({steps} step{'' if steps == 1 else 's'})"
    described = titles.sentence(name, arguments, approval.annotations) if _own_tool(approval, name) else ""
    if described and described != name:  # never only the tool's name: its arguments, then
        return described
    on = f" on {agent}" if approval.conversation.is_outside else ""
    shown = _arguments_in_words(arguments)
    return f"Call {name}{on} with {shown}" if shown else f"Call {name}{on} with no arguments"


def _own_tool(approval: Approval, name: str) -> bool:
    """Whether the tools' own words may say the call. Not for a tool an outside agent named that its
    agent has not built in: its arguments are the caller's, checked by no schema of ours, so a
    built-in tool's words ("Delete a.txt" for {"path": "a.txt", "root": "/"}) would say less than
    the call; every argument says it ("Call delete_file on ops-bot with path=a.txt, root=/")."""
    conversation = approval.conversation
    tools = conversation.agent.tools
    return conversation.source != conversation.Source.API or (isinstance(tools, list) and name in tools)


def _arguments_in_words(arguments: Any) -> str:
    """"service=api, version=1.4": each argument's value, short values whole (the details say all).
    A key or text that could read as more than itself (a comma, an equals sign, a space, a quote, a
    line break: "api, dry_run=true") is quoted as JSON, so no value passes for another argument."""
    if not isinstance(arguments, dict):
        return _short(json.dumps(arguments, ensure_ascii=False, default=str))
    pairs = []
    for key, value in arguments.items():
        text = _bare(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        pairs.append(f"{_bare(str(key))}={_short(text)}")
    return ", ".join(pairs)


# Text shown as it is in "key=value": no separator, space, quote or line break that could fake another pair.
_BARE = re.compile(r'[^\s,="\\]+')


def _bare(text: str) -> str:
    return text if _BARE.fullmatch(text) else json.dumps(text, ensure_ascii=False)


def _short(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def utf16_units(text: str) -> int:
    """How Telegram counts a text's length: UTF-16 code units (a character past U+FFFF is two)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _cut(sentence: str) -> tuple[str, bool]:
    if len(sentence) <= MAX_SENTENCE_CHARS:
        return sentence, True
    return sentence[: MAX_SENTENCE_CHARS - 1] + "…", False


def _asked_by(conversation, requester: str, agent: str) -> str:
    if conversation.source == conversation.Source.API:
        return f"an outside agent of {requester}, through {agent}"
    if conversation.source == conversation.Source.MCP:
        return f"an MCP client of {requester}, through {agent}"
    return f"{requester} ({agent})"


def why(approval: Approval, agent: str) -> str:
    """Why a person is asked: the gate's, a rule's or the outside caller's words, without the part
    that only says the call was gated; else the risk and who asks."""
    note = gate_note(approval.reason)
    if note:
        return note
    if approval.kind == Approval.Kind.QUESTION:
        return f"{agent} needs an answer to go on."
    if approval.kind == Approval.Kind.PLAN:
        return f"{agent} asks before it follows this plan."
    return f"{approval.risk.capitalize()} risk: {agent} asks a person before it makes this call."


def gate_note(reason: str) -> str:
    """The part of a gate's reason the card does not already say: a rule's words, a host off the
    allowlist, invisible characters; "" when the reason only says the call was gated."""
    return ROUTINE_REASON.sub("", reason or "", count=1).strip()
