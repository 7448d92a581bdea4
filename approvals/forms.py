"""The edit form of a gated call, built from its tool's JSON schema, and the arguments it posts.

Strings, numbers and booleans get fields of their own; anything else (lists, objects, unions) a
JSON text area. Parsing is lenient only about form encoding: the tool's own schema still decides
what is valid (approvals.services.approve_edited), and its error names the field.
"""
import json
from dataclasses import dataclass
from typing import Any

from .calls import InvalidArguments

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
