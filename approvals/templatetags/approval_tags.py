"""Template filters of approval cards: a preview's diff as rows to read, and an edit shown as a diff."""
import dataclasses
import difflib
import json
import re

from django import template
from django.urls import reverse

from core.visible import reveal

from approvals import summary
from approvals.cards import diffs, hints, titles
from approvals.deciders import votes
from approvals.pauses import plans, questions

register = template.Library()


@register.filter
def diff_class(line: str) -> str:
    """The CSS class of one line of a unified diff, for its colour (the history's edits)."""
    if line.startswith(("+++", "---")):
        return "diff-file"
    return {"+": "diff-add", "-": "diff-del", "@": "diff-hunk"}.get(line[:1], "")


def _revealed(rows: list[diffs.Row]) -> list[diffs.Row]:
    """Rows with their invisible characters shown, and a carriage return too: in a diff the line
    is what is compared, and a line "a\\r" is not the line "a" (a file's line ends changed)."""
    return [dataclasses.replace(row, text=reveal(row.text).replace("\r", "⟨U+000D⟩")) for row in rows]


@register.filter
def diff_rows(text: str) -> list[diffs.Row]:
    """A preview's unified diff as rows to read (approvals.cards.diffs.rows): line numbers, − before
    +, no headers. Only how it is drawn: the stored text, which channels send, stays the diff."""
    return _revealed(diffs.rows(str(text or "")))


@register.filter
def edit_rows(approval) -> list[diffs.Row]:
    """The edit of a call as rows (approvals.cards.diffs.edit_rows): a written file's lines, the
    other arguments' JSON lines."""
    return _revealed(diffs.edit_rows(approval.tool_call.arguments, approval.edited_arguments))


@register.filter
def file_argument(approval) -> str:
    """The argument holding the text of the file the call writes, "" if none (approvals.cards.diffs)."""
    return diffs.file_argument(approval.tool_call.arguments)


# The arguments that say what a call acts on, in the order to look for them.
TARGET_ARGUMENTS = ("path", "to", "url", "message", "name", "file", "query", "expression")
MAX_TARGET_CHARS = 80


@register.filter
def target(approval) -> str:
    """What the call acted on, in a few words, for a card's data-target and an inbox group's claims:
    the file, the address, the URL, the commit message (the approved version's, after an edit); a
    question's text, a plan's title. Invisible characters are shown."""
    if approval.kind == "question":
        text = (approval.question or {}).get("text", "")
    elif approval.kind == "plan":
        text = (approval.plan or {}).get("title", "")
    else:
        arguments = (approval.edited_arguments if approval.is_edited else approval.tool_call.arguments) or {}
        named = [arguments[key] for key in TARGET_ARGUMENTS if isinstance(arguments.get(key), str)]
        text = named[0] if named else next((value for value in arguments.values() if isinstance(value, str)), "")
    text = titles.one_line(text)
    return reveal(text if len(text) <= MAX_TARGET_CHARS else text[: MAX_TARGET_CHARS - 1] + "…")


def _approval_of(thing):
    """An Approval itself, or a ToolCall's approval when it was gated (None otherwise)."""
    if hasattr(thing, "tool_call_id"):
        return thing
    return thing.approval if getattr(thing, "is_gated", False) else None


@register.filter
def shown_arguments(thing):
    """The arguments a card shows: after an edit, the edited ones (what runs, or ran), else the
    call's own. `thing`: an Approval or a ToolCall."""
    approval = _approval_of(thing)
    if approval is not None and approval.is_edited:
        return approval.edited_arguments
    return (approval.tool_call if approval is not None else thing).arguments


@register.filter
def call_title(thing) -> str:
    """What the call does, in words, for a card's title and an inbox row ("Delete notes.txt",
    "Send an email to bob@example.com"): the tool's `describe` of the arguments shown (the edited
    ones after an edit); an MCP tool's title and key arguments; else the tool's name. `thing`: an
    Approval or a ToolCall. Invisible characters are shown."""
    approval = _approval_of(thing)
    call = approval.tool_call if approval is not None else thing
    annotations = approval.annotations if approval is not None else None
    return titles.shown_title(call.name, shown_arguments(thing), annotations)


@register.filter
def shown_question(question):
    """approvals.pauses.questions.as_shown: a confirmation with the words of its buttons."""
    return questions.as_shown(question)


@register.filter
def summary_of(approval) -> summary.Summary:
    """approvals.summary.summarize: the sentence, requester and why every surface says."""
    return summary.summarize(approval)


@register.filter
def gate_note(reason: str) -> str:
    """approvals.summary.gate_note: what the gate's reason says beyond "it was gated"."""
    return summary.gate_note(reason)


# Arguments whose text is prose or a file's content: edited in a text area however short.
PROSE_ARGUMENTS = {"content", "body", "text", "message", "description", "note", "notes"}
MAX_EDITOR_ROWS = 16


@register.filter
def edits_as_line(field) -> bool:
    """Whether an edit form's text field is a one-line input: a short string that is not prose."""
    return field.widget == "text" and field.name not in PROSE_ARGUMENTS


@register.filter
def editor_rows(field) -> int:
    """A text area's height: its text's lines and a little room, within MAX_EDITOR_ROWS."""
    text = field.text if isinstance(field.text, str) else ""
    return min(max(3, text.count("\n") + 2, len(text) // 70 + 2), MAX_EDITOR_ROWS)


@register.filter
def requested_json(approval) -> str:
    """The arguments as requested, as JSON for an attribute (escaped there) of the edit form, for
    its live diff (static/js/editdiff.js). Not a <script>: htmx drops scripts from what it swaps in."""
    return json.dumps(approval.tool_call.arguments, ensure_ascii=False)


@register.filter
def edit_diff(approval) -> list[str]:
    """The arguments as requested against the arguments as edited, as unified diff lines of their
    pretty JSON, with invisible characters shown: the history's and the admin's (a card draws
    edit_rows)."""

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


@register.filter
def step_duration(seconds) -> str:
    """A plan step's estimate as the card shows it: "about 5 min"."""
    return plans.duration_text(seconds if isinstance(seconds, int) else None)


@register.filter
def plan_names_tools(plan) -> bool:
    return isinstance(plan, dict) and plans.names_tools(plan)


@register.filter
def plan_hold(approval) -> str:
    """Why an approved plan holds this call, in words (chat.planned), or "": the card says it first."""
    return next((step.get("detail", "") for step in approval.explanation or [] if isinstance(step, dict) and step.get("step") == "plan"), "")


@register.filter
def plan_as_approved(approval) -> list[dict]:
    """An approved plan's steps as the decider left them (their words, their order), else as proposed."""
    answer = approval.answer if isinstance(approval.answer, dict) else {}
    if answer.get("steps"):
        return answer["steps"]
    kept = answer.get("approved_steps")
    return [s for s in (approval.plan or {}).get("steps", []) if kept is None or s["index"] in kept]


@register.simple_tag
def approval_url(name: str, approval, via: str) -> str:
    """The route of an approval's `name` view (decide, edit, controls) for the surface showing it:
    the route, not a form field, says how a decision was made (`decided_via`)."""
    prefix = "dashboard_" if via == "dashboard" else ""
    return reverse(f"approvals:{prefix}{name}", args=[approval.pk])


@register.filter
def votes_summary(approval) -> str:
    """"1 of 2 approvals: bob" for a call that needs several approvals; "" otherwise."""
    return votes.summary(approval)


@register.filter
def votes_count(approval) -> int:
    return len(votes.counted(approval)) if approval.quorum > 1 else 0


@register.filter
def route_need(approval) -> str:
    """Who must decide a routed call, for whoever may not: "Needs 2 approvals from finance" (and,
    once escalated, "from finance or on-call"); "" for an unrouted call. Reads the route's groups
    as prefetched (approvals.selectors.with_routes)."""
    if approval.route_id is None:
        return ""
    groups = list(approval.route.approvers.all())
    if approval.escalated_at is not None:
        groups += [group for group in approval.route.escalate_to.all() if group not in groups]
    names = " or ".join(group.name for group in groups) or "its groups"
    many = f"{approval.quorum} approvals" if approval.quorum > 1 else "an approval"
    return f"Needs {many} from {names}"


@register.filter
def decider(approval) -> str:
    """Who decided, and for whom through a delegation: "bob for alice"; "the system" for nobody."""
    if approval.decided_by_id is None:
        return "the system"
    who = approval.decided_by.get_username()
    return f"{who} for {approval.on_behalf_of.get_username()}" if approval.on_behalf_of_id else who


@register.filter
def rule_made(approval):
    """The live rule saved with this decision ("Always" on its card), which the card offers to undo;
    read from chat.messages.load_calls' prefetch when there, else looked up."""
    made = getattr(approval, "live_rules_made", None)
    if made is None:
        if not approval.remembered:
            return None
        made = list(approval.rules_made.filter(deleted_at__isnull=True)[:1])
    return made[0] if made else None

