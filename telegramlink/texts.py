"""What the bot shows: an approval request (escaped, every invisible or direction-changing character
revealed as ⟨U+202E⟩, fitted to the Bot API's limits; Telegram's HTML) with its buttons, and the
same request once decided, without buttons. Pure but for reading the approval's rows."""
import json
import re
from dataclasses import dataclass
from html import escape, unescape

from django.conf import settings

from approvals import votes
from approvals.models import Approval
from approvals.outcomes import outcome_line  # noqa: F401  (texts.outcome_line: the bot's "Too late: …")
from approvals.templatetags.approval_tags import route_need
from hitl.visible import reveal, reveal_line

MAX_TEXT = 4096  # the Bot API's limit: characters of a message's text after entities parsing
MAX_BUTTON_CHARS = 60  # a button's label (Telegram draws a long one cut, so two could look alike)
MAX_LINE_CHARS = 300  # a one-line field: the agent's name, the reason, the confirmation hint
MAX_OUTCOME_CHARS = 1000  # a rejection's reason or an answer, under the request once decided
CUT = "… see the site"
APPROVE, REJECT, REJECT_WITH_REASON, CHOOSE, TYPE = "a", "r", "R", "o", "t"


@dataclass(frozen=True)
class Shown:
    """A request's text, and whether it holds everything a decision covers. One the Bot API's limit
    cut is decided on the site: its buttons only reject (a tap must never approve what was cut)."""

    text: str
    is_whole: bool


def request(approval: Approval, *, room: int = MAX_TEXT) -> Shown:
    """The request in at most `room` characters (as Telegram counts them): the detail (preview,
    arguments the preview does not show, question, plan) is what gets cut, ending in CUT."""
    head, (opening, detail, closing), tail, whole = _parts(approval)
    text = _join(head, opening + escape(detail) + closing, tail)
    if whole and _length(text) <= room:
        return Shown(text, True)
    if approval.status == Approval.Status.PENDING:
        decide = "answer" if approval.kind == Approval.Kind.QUESTION else "approve"
        tail = [f"Too long for Telegram: {decide} it on the site."] + tail
        text = _join(head, opening + escape(detail) + closing, tail)
    if _length(text) > room:
        left = room - _length(_join(head, opening + closing, tail)) - _length("\n" + CUT)
        text = _join(head, opening + escape(_cut_to(detail, max(left, 0)) + "\n" + CUT) + closing, tail)
    return Shown(text, False)


def request_text(approval: Approval) -> str:
    return request(approval).text


def outcome_text(approval: Approval) -> str:
    """The request as it was shown, and under it what became of it."""
    outcome = "\n\n" + escape(_short(outcome_line(approval), MAX_OUTCOME_CHARS))
    return request(approval, room=MAX_TEXT - _length(outcome)).text + outcome


def reminder(approval: Approval) -> str:
    """The one "still waiting" a sent request gets when its route's reminder is due (a reply to it)."""
    call, agent = approval.tool_call, approval.conversation.agent
    count = f" ({_e(votes.summary(approval))})" if approval.quorum > 1 else ""
    since = f"{approval.requested_at:%H:%M} UTC"
    return (f"⏰ Reminder: still waiting for a decision on #{approval.pk} · {_e(agent.name)} · "
            f"<code>{_e(call.name)}</code>, requested at {since}{count}. Decide with the buttons above or on "
            f'<a href="{escape(conversation_url(approval), quote=True)}">the site</a>.')


def counted_line(approval: Approval) -> str:
    """What a person hears once their approve is counted toward a quorum that is not reached yet."""
    return f"Your approval is counted: {len(votes.counted(approval))} of {approval.quorum}."


def buttons(approval: Approval, token: str, *, is_whole: bool = True) -> list[list[tuple[str, str]]]:
    """The buttons of the message showing `approval`; `token` names that message's version. A
    message that could not show it whole only rejects."""
    if approval.kind == Approval.Kind.QUESTION:
        decline = [[("Reject (decline to answer)", f"{REJECT}:{token}")]]
        question = approval.question
        if not is_whole:
            return decline
        if question["type"] == "confirm":
            return [[("Yes", f"{CHOOSE}0:{token}"), ("No", f"{CHOOSE}1:{token}")]] + decline
        if question["type"] == "choice":
            labels, _ = option_labels(question["options"])
            return [[(label, f"{CHOOSE}{index}:{token}")] for index, label in enumerate(labels)] + decline
        return [[("Answer (type it)", f"{TYPE}:{token}")]] + decline
    reject_with_reason = [("Reject with reason", f"{REJECT_WITH_REASON}:{token}")]
    if not is_whole:
        return [[("Reject", f"{REJECT}:{token}")], reject_with_reason]
    approve = "Approve (type the confirmation)" if approval.confirmation_required else "Approve"
    return [[(approve, f"{APPROVE}:{token}"), ("Reject", f"{REJECT}:{token}")], reject_with_reason]


def option_labels(options: list) -> tuple[list[str], bool]:
    """Each option as its button says it, revealed; and whether they are numbered (some were too
    long for a button, or look alike), in which case the message lists them in full."""
    labels = [reveal_line(str(option)) for option in options]
    if all(len(label) <= MAX_BUTTON_CHARS for label in labels) and len(set(labels)) == len(labels):
        return labels, False
    return [f"{index}. {_short(label, MAX_BUTTON_CHARS - 4)}" for index, label in enumerate(labels, 1)], True


def conversation_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def _parts(approval: Approval) -> tuple[list[str], tuple[str, str, str], list[str], bool]:
    """(lines above the detail, (HTML before it, the detail as plain text, HTML after it), lines
    under it, whether it is all there). Every line but the detail is short or capped."""
    call, agent = approval.tool_call, approval.conversation.agent
    tail, whole = [], True
    if approval.kind == Approval.Kind.QUESTION:
        head = [f"❓ <b>{_e(agent.name)} asks</b> (#{approval.pk})"]
        detail = ("", _question(approval.question), "")
    else:
        title = "Plan to approve" if approval.kind == Approval.Kind.PLAN else "Approval needed"
        head = [
            f"🔔 <b>{title}</b> (#{approval.pk}) · {_e(agent.name)}",
            f"Tool: <code>{_e(call.name)}</code> · risk <b>{_e(approval.risk)}</b>",
            f"Why: {_e(approval.reason)}",
        ]
        detail = ("<pre>", _detail(approval), "</pre>")
        if approval.confirmation_required:
            hint = reveal(approval.confirmation_hint)
            whole = len(hint) <= MAX_LINE_CHARS  # a hint cut short cannot be typed
            tail.append(f"Critical: approving it needs the confirmation <code>{_e(hint)}</code>.")
        if approval.route_id is not None:
            tail.append(f"{_e(route_need(approval))}, never the requester's.")
        elif approval.approver_required:
            tail.append("Four eyes: an approver other than the requester decides.")
        if approval.quorum > 1:
            tail.append(f"🗳 {_e(votes.summary(approval))}")
        if approval.escalated_at and approval.status == Approval.Status.PENDING:
            tail.append(f"Escalated at {approval.escalated_at:%H:%M} UTC: nobody decided it in time, so its escalation groups may too.")
    if approval.expires_at:
        tail.append(f"Expires: {approval.expires_at:%Y-%m-%d %H:%M} UTC")
    tail.append(f'<a href="{escape(conversation_url(approval), quote=True)}">Open the conversation</a>')
    return head, detail, tail, whole


def _question(question: dict) -> str:
    text = reveal(question["text"])
    options = question.get("options") or []
    if question["type"] == "multi_choice" or (question["type"] == "choice" and option_labels(options)[1]):
        text += "\n\nOptions:\n" + "\n".join(f"{index}. {reveal_line(str(option))}" for index, option in enumerate(options, 1))
    return text


def _detail(approval: Approval) -> str:
    """The preview and every argument it does not show (a fetch's preview names the host, not the
    path and query where a secret travels), or else the arguments; the edited ones, if edited."""
    if approval.kind == Approval.Kind.PLAN:
        return "\n".join(f"{step['index']}. {reveal(str(step['action']))}" + (" (optional)" if step.get("optional") else "")
                         for step in approval.plan["steps"])
    arguments = approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
    if not approval.preview:
        return reveal(json.dumps(arguments, ensure_ascii=False, indent=1))
    preview = reveal(approval.preview["text"])
    if not isinstance(arguments, dict):
        unshown = arguments
    else:
        unshown = {name: value for name, value in arguments.items() if not _displays(preview, value)}
    if not unshown:
        return preview
    return f"{preview}\n\nAlso in the call:\n{reveal(json.dumps(unshown, ensure_ascii=False, indent=1))}"


def _displays(preview: str, value) -> bool:
    """Whether the preview shows this argument's value whole (not inside a longer word): only a
    string can be; an empty one shows as nothing."""
    if not isinstance(value, str):
        return False
    if not value:
        return True
    return any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", preview) for form in {reveal(value), reveal_line(value)})


def _join(head: list[str], detail: str, tail: list[str]) -> str:
    return "\n".join(head + [detail] + tail)


def _length(html: str) -> int:
    """Characters as the Bot API counts its limit: the text after entities parsing, in UTF-16 code
    units (what Telegram counts in; never fewer than the code points)."""
    return len(unescape(re.sub(r"<[^>]*>", "", html)).encode("utf-16-le")) // 2


def _cut_to(text: str, units: int) -> str:
    """`text` in at most `units` UTF-16 code units, never half a character."""
    return text.encode("utf-16-le")[: units * 2].decode("utf-16-le", errors="ignore")


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(text) -> str:
    """A one-line field: revealed, capped, escaped."""
    return escape(_short(reveal(str(text)), MAX_LINE_CHARS), quote=True)
