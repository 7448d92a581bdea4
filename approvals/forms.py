"""The edit form of a gated call, built from its tool's JSON schema, and the arguments it posts; and
the time-boxed grant a card's "Always…" menu asks for (grant_from_form).

Strings, numbers and booleans get fields of their own; anything else (lists, objects, unions) a
JSON text area. Parsing is lenient only about form encoding: the tool's own schema still decides
what is valid (approvals.services.approve_edited), and its error names the field.
"""
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils import timezone

from core.inputs import BadInput

from . import services
from .policy import rulemaking, rules
from .policy.calls import InvalidArguments
from .models import Approval, Rule

LONG_TEXT = 60  # characters past which a string is edited in a text area
FIELD_PREFIX = "arg-"  # form field names, so that no argument collides with decision, reason, ...


@dataclass(frozen=True)
class EditField:
    name: str
    widget: str  # "text", "textarea", "number", "checkbox" or "json"
    value: Any
    required: bool
    description: str = ""

    @property
    def form_name(self) -> str:
        return FIELD_PREFIX + self.name

    @property
    def text(self) -> str:
        """The value as the widget shows it."""
        if self.widget == "json":
            return json.dumps(self.value, indent=2, ensure_ascii=False)
        return "" if self.value is None else str(self.value)


def edit_fields(schema: dict, arguments: dict) -> list[EditField]:
    required = set(schema.get("required", []))
    fields = []
    for name, spec in (schema.get("properties") or {}).items():
        value = arguments.get(name, spec.get("default"))
        fields.append(EditField(name, _widget(spec, value), value, name in required, spec.get("description", "")))
    return fields


def _widget(spec: dict, value: Any) -> str:
    kind = spec.get("type")
    if kind == "string":
        return "textarea" if isinstance(value, str) and ("\n" in value or len(value) > LONG_TEXT) else "text"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "checkbox"
    return "json"


def arguments_from_form(schema: dict, data) -> dict:
    """The arguments a posted edit form holds, typed as the schema says. A field left empty that
    the tool does not require is left out (the tool's default applies)."""
    arguments = {}
    for field in edit_fields(schema, {}):
        raw = data.get(field.form_name)
        if field.widget == "checkbox":
            arguments[field.name] = raw is not None
            continue
        if raw is None or (raw == "" and not field.required and field.widget != "text"):
            continue
        if field.widget == "number":
            arguments[field.name] = _number(field.name, raw)
        elif field.widget == "json":
            try:
                arguments[field.name] = json.loads(raw)
            except ValueError as exc:
                raise InvalidArguments(f"{field.name}: not valid JSON ({exc}).") from None
            except RecursionError:
                raise InvalidArguments(f"{field.name}: nested too deeply.") from None
        else:
            arguments[field.name] = raw.replace("\r\n", "\n")  # browsers send text areas with CRLF
    return arguments


def _number(name: str, raw: str) -> int | float:
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        raise InvalidArguments(f"{name}: {raw!r} is not a number.") from None


# --- Time-boxed grants: the card's "Approve for 10 minutes in this conversation" ----------------------

GRANTS = {"10m": (timedelta(minutes=10), "10 minutes"), "1h": (timedelta(hours=1), "1 hour")}


class GrantRefused(BadInput):
    """A grant the card may not make (400): nothing is decided, nothing is saved."""


def grant_from_form(data, approval, *, now=None) -> dict | None:
    """The rule that a card's `grant` (10m or 1h) asks to remember with its approval, as
    approvals.services.decide_remembering takes it: allow, with the conditions prefilled from the
    version shown (rulemaking.conditions_for, as "Always…" prefills them and the card shows them),
    in this conversation only, expiring by itself. None when the form asks for no grant."""
    choice = data.get("grant", "")
    if not choice:
        return None
    if choice not in GRANTS:
        raise GrantRefused("A grant is for 10 minutes (grant=10m) or 1 hour (grant=1h).")
    if data.get("decision") != "approve" or data.get("remember_scope") or any(key.startswith("cond:") for key in data):
        raise GrantRefused("A grant approves the call, in this conversation, with the call's own conditions: send only decision=approve and grant.")
    if not may_grant(approval):
        raise GrantRefused(
            "No grant for this call: a critical, four-eyes or routed call (or one over the agent's limit, with "
            "invisible characters, or needing a passkey) is approved by a person each time. Approve it alone."
        )
    duration, words = GRANTS[choice]
    conditions = rulemaking.conditions_for(_shown_arguments(approval))
    described = " ".join(f"{name} {pattern}" for name, pattern in conditions.items())
    note = " ".join(part for part in ("allow", approval.tool_call.name, described, f"for {words} in this conversation") if part)
    return {"scope": Rule.Scope.CONVERSATION, "arguments": conditions, "expires_at": (now or timezone.now()) + duration,
            "note": note[:rulemaking.MAX_NOTE_CHARS]}


def may_grant(approval) -> bool:
    """Whether the card may offer a grant: only for what an allow rule could ever approve
    (approvals.policy.rules.may_auto_approve), the version shown (an edit's); never a routed call, nor one
    whose approval needs the approver's passkey (a grant would let the next ones through without it)."""
    if approval.kind != Approval.Kind.ACTION or approval.route_id is not None or services.needs_step_up(approval):
        return False
    call = rules.Call(
        tool=approval.tool_call.name, arguments=_shown_arguments(approval), risk=approval.risk, approver_required=approval.approver_required,
        max_auto_approve_risk=approval.conversation.agent.max_auto_approve_risk,
        step_up_from_risk=approval.conversation.agent.step_up_from_risk,
    )
    return rules.may_auto_approve(call)


def _shown_arguments(approval) -> dict:
    """The version the card shows, and so the one approved: an edit's, else the call's."""
    return approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
