"""Template filters of approval cards: a preview's lines, and an edit shown as a diff."""
import difflib
import json

from django import template
from django.urls import reverse

from hitl.visible import reveal

from approvals import hints, questions

register = template.Library()


@register.filter
def lines(text: str) -> list[str]:
    return (text or "").splitlines()


@register.filter
def diff_class(line: str) -> str:
    """The CSS class of one line of a unified diff, for its colour."""
    if line.startswith(("+++", "---")):
        return "diff-file"
    return {"+": "diff-add", "-": "diff-del", "@": "diff-hunk"}.get(line[:1], "")


# The arguments that say what a call acts on, in the order to look for them.
TARGET_ARGUMENTS = ("path", "to", "url", "message", "name", "file", "query", "expression")
MAX_TARGET_CHARS = 80


@register.filter
def target(approval) -> str:
    """What the call acted on, in a few words, for a row of the history: the file, the address, the
    URL, the commit message (the approved version's, after an edit); a question's text, a plan's
    title. Invisible characters are shown."""
    if approval.kind == "question":
        text = (approval.question or {}).get("text", "")
    elif approval.kind == "plan":
        text = (approval.plan or {}).get("title", "")
    else:
        arguments = (approval.edited_arguments if approval.is_edited else approval.tool_call.arguments) or {}
        named = [arguments[key] for key in TARGET_ARGUMENTS if isinstance(arguments.get(key), str)]
        text = named[0] if named else next((value for value in arguments.values() if isinstance(value, str)), "")
    text = " ".join(text.split())
    return reveal(text if len(text) <= MAX_TARGET_CHARS else text[: MAX_TARGET_CHARS - 1] + "…")


@register.filter
def edit_diff(approval) -> list[str]:
    """The arguments as requested against the arguments as edited, as unified diff lines of their
    pretty JSON, with invisible characters shown."""

    def pretty(value) -> list[str]:
        return reveal(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)).splitlines()

    diff = difflib.unified_diff(
        pretty(approval.tool_call.arguments), pretty(approval.edited_arguments), "requested", "edited", lineterm="", n=1
    )
    return list(diff)[2:]  # the file header says nothing the caption does not


@register.filter
def server_hints(annotations) -> str:
    """A tool server's annotations in words: "read-only", "destructive, reaches the outside world"."""
    return ", ".join(hints.server_hints(annotations))


@register.filter
def shown_answer(answer) -> str:
    """A question's answer as a person reads it (a list joined, yes or no)."""
    return questions.shown(answer)


@register.simple_tag
def approval_url(name: str, approval, via: str) -> str:
    """The route of an approval's `name` view (decide, edit, controls) for the surface showing it:
    the route, not a form field, says how a decision was made (`decided_via`)."""
    prefix = "dashboard_" if via == "dashboard" else ""
    return reverse(f"approvals:{prefix}{name}", args=[approval.pk])
