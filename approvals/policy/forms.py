"""The rules page's "New rule" form: what it posts, read into the fields rulemaking.draft and the
simulator take (as POST /api/rules and POST /api/rules/simulate do), and what it offers to choose."""
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone

from core.inputs import storable

from . import simulate
from ..models import Rule
from .rulemaking import InvalidRule, allowed_scopes

EFFECTS = [(Rule.Effect.ALLOW, "Allow"), (Rule.Effect.DENY, "Deny"), (Rule.Effect.ASK, "Ask a human")]
MODES = [(Rule.Mode.LIVE, "Live: it decides"), (Rule.Mode.SHADOW, "Shadow: it decides nothing, and counts what it would have done")]
SCOPES = {
    Rule.Scope.CONVERSATION: "One conversation of yours",
    Rule.Scope.AGENT_USER: "An agent, in your conversations",
    Rule.Scope.AGENT: "An agent, in everyone's conversations",
    Rule.Scope.GLOBAL: "Every agent, for everyone",
}
CONVERSATIONS_OFFERED = 50
MAX_FIELD_CHARS = 10_000


@dataclass
class RuleForm:
    """The form's values as posted (shown again with its simulation or its error)."""

    effect: str = Rule.Effect.ALLOW
    tool: str = ""
    conditions: str = ""  # one per line: `name = glob` or `name ~ regex`
    scope: str = Rule.Scope.AGENT_USER
    conversation: str = ""
    agent: str = ""
    expires: str = ""  # datetime-local, UTC
    max_uses: str = ""
    note: str = ""
    days: str = str(simulate.DEFAULT_DAYS)
    mode: str = Rule.Mode.LIVE
    after_tool: str = ""  # only after such a call succeeded in the conversation (approvals.policy.memory)
    after_same: str = ""  # argument names, separated by commas, whose values must be the same
    after_seconds: str = "3600"
    at_most_count: str = ""  # decides at most this many calls in any window of at_most_seconds
    at_most_seconds: str = "3600"

    @classmethod
    def from_post(cls, post) -> "RuleForm":
        def text(name: str) -> str:
            return storable(post.get(name, ""))

        return cls(**{name: text(name) for name in (
            "effect", "tool", "conditions", "scope", "conversation", "agent", "expires", "max_uses", "note", "days", "mode",
            "after_tool", "after_same", "after_seconds", "at_most_count", "at_most_seconds",
        )} | {"mode": text("mode") or Rule.Mode.LIVE})

    def rule_fields(self) -> dict:
        """The fields of rulemaking.draft; raises InvalidRule (in words) for what cannot be read."""
        for name, value in self.__dict__.items():
            if len(value) > MAX_FIELD_CHARS:  # refused rather than cut: a cut condition would mean something else
                raise InvalidRule(f"The {name.replace('_', ' ')} field is at most {MAX_FIELD_CHARS} characters.")
        return {
            "effect": self.effect,
            "tool": self.tool,
            "arguments": parse_conditions(self.conditions),
            "scope": self.scope,
            "conversation_id": _uuid(self.conversation) if self.scope == Rule.Scope.CONVERSATION else None,
            "agent": self.agent.strip() if self.scope in (Rule.Scope.AGENT_USER, Rule.Scope.AGENT) else "",
            "expires_at": _expiry(self.expires),
            "max_uses": _whole(self.max_uses, "Max uses") if self.max_uses.strip() else None,
            "note": self.note,
            "mode": self.mode,
            "after": {
                "tool": self.after_tool.strip(), "status": "succeeded",
                "same": [name.strip() for name in self.after_same.split(",") if name.strip()],
                "within_seconds": _whole(self.after_seconds, "After: within seconds"),
            } if self.after_tool.strip() else None,
            "at_most": {
                "count": _whole(self.at_most_count, "At most"), "within_seconds": _whole(self.at_most_seconds, "At most: per seconds"),
            } if self.at_most_count.strip() else None,
        }

    def days_back(self) -> int:
        return _whole(self.days, "Days") if self.days.strip() else simulate.DEFAULT_DAYS


def parse_conditions(text: str) -> dict:
    """`path = notes/*` (a glob) or `command ~ rm .*` (a regex, RE2), one per line."""
    conditions = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cut = min((line.find(mark) for mark in "=~" if mark in line), default=-1)
        name, pattern = line[:cut].strip(), line[cut + 1 :].strip()
        if cut < 0 or not name or not pattern:
            raise InvalidRule(f"Condition line {number}: write `name = glob` or `name ~ regex`.")
        if name in conditions:
            raise InvalidRule(f"Condition line {number}: {name!r} has a condition already.")
        conditions[name] = {"regex": pattern} if line[cut] == "~" else pattern
    return conditions


def _uuid(text: str):
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise InvalidRule("Choose a conversation.") from None


def _expiry(text: str):
    if not text.strip():
        return None
    try:
        return datetime.fromisoformat(text.strip()).replace(tzinfo=dt_timezone.utc)
    except ValueError:
        raise InvalidRule("Expires: a date and time such as 2030-01-31T17:00 (UTC).") from None


def _whole(text: str, label: str) -> int:
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        raise InvalidRule(f"{label}: a whole number.")
    return int(text)


def choices_for(user) -> dict:
    """What the form offers: the effects, the scopes this user may use, their newest conversations
    and the agents of those (an approver: every agent)."""
    Conversation = Rule.conversation.field.related_model  # approvals never imports chat
    Agent = Rule.agent.field.related_model
    conversations = list(
        Conversation.objects.filter(owner=user).select_related("agent").order_by("-created_at")[:CONVERSATIONS_OFFERED]
    )
    scopes = allowed_scopes(user)
    if Rule.Scope.AGENT in scopes:
        agents = list(Agent.objects.order_by("name"))
    else:
        agents = sorted({c.agent_id: c.agent for c in conversations}.values(), key=lambda agent: agent.name)
    return {
        "effects": EFFECTS,
        "modes": MODES,
        "scopes": [(scope, SCOPES[scope]) for scope in scopes],
        "conversations": conversations,
        "agents": agents,
    }
