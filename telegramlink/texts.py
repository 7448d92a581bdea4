"""What the bot shows, made from approvals.summary (the one summary of a call; nothing here says in
its own words what a call does): the request (what Approve does and who asked, why, then the whole
details when Telegram's limit holds them, else cut, with the way to the site), its buttons, the
warning before it expires, and the same request once decided, without buttons. Telegram's HTML,
escaped; pure but for reading the approval's rows."""
import ipaddress
import math
import re
from dataclasses import dataclass
from datetime import datetime
from html import escape, unescape
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from approvals.deciders import votes
from approvals.models import Approval
from approvals.pauses import questions
from approvals.announcements.outcomes import outcome_line  # noqa: F401  (texts.outcome_line: the bot's "Too late: …")
from approvals.summary import Summary, summarize
from approvals.templatetags.approval_tags import route_need
from core.visible import reveal, reveal_line

MAX_TEXT = 4096  # the Bot API's limit: characters of a message's text after entities parsing
# Kept free under that limit: Telegram's own count (after it parses the entities) is the one that
# refuses a message, ours is a careful estimate of it.
ROOM = MAX_TEXT - 96
MAX_BUTTON_CHARS = 60  # a button's label (Telegram draws a long one cut, so two could look alike)
MAX_LINE_CHARS = 300  # a one-line field: the agent's name, the reason, the confirmation hint
MAX_OUTCOME_CHARS = 1000  # a rejection's reason or an answer, under the request once decided
# The most of a cut call's details a message shows: enough to reject it knowingly, short enough to
# read on a phone (the site shows the rest).
MAX_CUT_CHARS = 1200
CUT = "… see the site"
APPROVE, REJECT, REJECT_WITH_REASON, CHOOSE, TYPE, EXTEND = "a", "r", "R", "o", "t", "x"
# The question types a message answers (option buttons, or a typed reply approvals.pauses.questions
# reads); a question of any other type is answered on the site.
ANSWERABLE = ("text", "choice", "multi_choice", "number", "date", "confirm")
ICONS = {Approval.Kind.ACTION: "🔔", Approval.Kind.QUESTION: "❓", Approval.Kind.PLAN: "📋"}


@dataclass(frozen=True)
class Shown:
    """A request's text, and whether it holds everything a decision covers (`complete`). One that
    does not (cut by the Bot API's limit, sentence only, a kind Telegram cannot show) is approved on
    the site: its buttons only reject, and the server refuses an approve through it."""

    text: str
    complete: bool


def request(approval: Approval, *, room: int = ROOM) -> Shown:
    """The request in at most `room` characters (as Telegram counts them): the details (preview and
    arguments, the question) are what gets cut, ending in CUT."""
    summary = summarize(approval)
    head, tail = _head(approval, summary), _tail(approval, summary)
    pending = approval.status == Approval.Status.PENDING
    kept_off = _kept_off(approval)
    if kept_off:
        return Shown(_join(head, None, ([kept_off] if pending else []) + tail), False)
    opening, detail, closing = _details(approval, summary)
    text = _join(head, opening + escape(detail) + closing, tail)
    if summary.sentence_whole and _typable(approval) and _length(text) <= room:
        return Shown(text, True)
    if pending:
        decide = "answer" if approval.kind == Approval.Kind.QUESTION else "approve"
        # Said above the details, so the person knows before reading them that they end cut.
        head = head + [f"Cut: too long for Telegram. Open it in hitl to see the whole call and {decide} it there."]
        text = _join(head, opening + escape(detail) + closing, tail)
    if _length(text) > room:
        left = min(room - _length(_join(head, opening + closing, tail)) - _length("\n" + CUT), MAX_CUT_CHARS)
        text = _join(head, opening + escape(_cut_to(detail, max(left, 0)) + "\n" + CUT) + closing, tail)
    return Shown(text, False)


def request_text(approval: Approval) -> str:
    return request(approval).text


def outcome_text(approval: Approval) -> str:
    """The request as it was shown, and under it what became of it; an expired one points to its
    card, where it can be asked again."""
    outcome = "\n\n" + escape(_short(outcome_line(approval), MAX_OUTCOME_CHARS))
    if approval.status == Approval.Status.EXPIRED:
        outcome += f"\n{_link(approval, 'Ask again in hitl')}: the card keeps the call."
    return request(approval, room=ROOM - _length(outcome)).text + outcome


NOT_YOURS = "This call was edited and is now decided by others: see it on the site."


def not_yours(approval: Approval) -> str:
    """A copy whose reader may no longer decide it (an edit handed it to other approvers): the call
    as it stands, without buttons."""
    line = f"\n\n{escape(NOT_YOURS)} {_link(approval, 'Open in hitl')}"
    return request(approval, room=ROOM - _length(line)).text + line


def reminder(approval: Approval) -> str:
    """The one "still waiting" a sent request gets when its route's reminder is due (a reply to it)."""
    summary = summarize(approval)
    count = f" ({_e(votes.summary(approval))})" if approval.quorum > 1 else ""
    since = f"{approval.requested_at:%H:%M} UTC"
    return (f"⏰ Reminder: still waiting for a decision on #{approval.pk}: {escape(summary.sentence)}, requested at "
            f"{since}{count}. Decide with the buttons above or {_link(approval, 'in hitl')}.")


def warning(approval: Approval, *, now: datetime | None = None) -> str:
    """The reply a sent request gets before its approval expires: "Expires at 12:34 UTC (in 3 min)"."""
    summary = summarize(approval)
    left = (approval.expires_at - (now or timezone.now())).total_seconds()
    within = f"in {math.ceil(left / 60)} min" if left >= 60 else "in under a minute"
    then = ("Decide with the buttons above, or extend it once."
            if approval.extended_at is None else "It was extended once already: decide it before then.")
    return (f"⏳ <b>{summary.at_deadline} at {approval.expires_at:%H:%M} UTC ({within}){summary.unless}</b>: #{approval.pk}, "
            f"{escape(summary.sentence)}. {then}")


def warning_buttons(approval: Approval, token: str) -> list[list[tuple[str, str]]]:
    """Extend, while it can be (once): the press pushes the deadline back by the agent's timeout."""
    return [[("Extend", f"{EXTEND}:{token}")]] if approval.extended_at is None else []


def warning_spent(approval: Approval) -> str:
    """A warning once its Extend button is spent: extended (by whom, to when), or decided."""
    if approval.status != Approval.Status.PENDING:
        return f"⏳ #{approval.pk}: {escape(outcome_line(approval))}"
    who = approval.extended_by.get_username() if approval.extended_by_id else "someone"
    return f"⏳ #{approval.pk} was extended by {_e(who)}: it now expires at {approval.expires_at:%Y-%m-%d %H:%M} UTC."


def reason_prompt(approval: Approval, token: str) -> tuple[str, list[list[tuple[str, str]]]]:
    """What Reject asks: the reason, as the next message; or, with its button, no reason."""
    return f"Why reject #{approval.pk}? Reply with the reason.", [[("Reject without a reason", f"{REJECT}:{token}")]]


def counted_line(approval: Approval) -> str:
    """What a person hears once their approve is counted toward a quorum that is not reached yet."""
    return f"Your approval is counted: {len(votes.counted(approval))} of {approval.quorum}."


def buttons(approval: Approval, token: str, *, complete: bool) -> list[list[tuple[str, str]]]:
    """The buttons of the message showing `approval`; `token` names that message's version. One
    that did not show it whole (`complete` False) only rejects, and opens the site. Reject asks for
    the reason; declining a question does not (nothing runs either way)."""
    site = [[("Open in hitl", conversation_url(approval))]] if _opens_on_a_phone(conversation_url(approval)) else []
    if approval.kind == Approval.Kind.QUESTION:
        decline = [[("Reject (decline to answer)", f"{REJECT}:{token}")]]
        question = approval.question
        if not complete:
            return decline + site
        if question["type"] == "confirm":
            yes, no = (reveal_line(label) for label in questions.labels(question))
            return [[(yes, f"{CHOOSE}0:{token}"), (no, f"{CHOOSE}1:{token}")]] + decline
        if question["type"] == "choice":
            labels, _ = option_labels(question["options"])
            return [[(label, f"{CHOOSE}{index}:{token}")] for index, label in enumerate(labels)] + decline
        return [[("Answer (type it)", f"{TYPE}:{token}")]] + decline
    reject = ("Reject", f"{REJECT_WITH_REASON}:{token}")
    if not complete or approval.kind != Approval.Kind.ACTION:
        return [[reject]] + site
    approve = "Approve (type the confirmation)" if approval.confirmation_required else "Approve"
    return [[(approve, f"{APPROVE}:{token}"), reject]]


def option_labels(options: list) -> tuple[list[str], bool]:
    """Each option as its button says it, revealed; and whether they are numbered (some were too
    long for a button, or look alike), in which case the message lists them in full."""
    labels = [reveal_line(str(option)) for option in options]
    if all(len(label) <= MAX_BUTTON_CHARS for label in labels) and len(set(labels)) == len(labels):
        return labels, False
    return [f"{index}. {_short(label, MAX_BUTTON_CHARS - 4)}" for index, label in enumerate(labels, 1)], True


def conversation_url(approval: Approval) -> str:
    """The approval's card in its conversation (where it is approved whole, extended or asked again)."""
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def _head(approval: Approval, summary: Summary) -> list[str]:
    """What Approve does and who asked, why, and the tool and its risk: every line short or capped."""
    head = [f"{ICONS.get(approval.kind, '🔔')} <b>{escape(summary.head)}</b> (#{approval.pk})", f"Why: {_e(summary.why)}"]
    if approval.kind != Approval.Kind.QUESTION:
        head.append(f"Tool: <code>{_e(approval.tool_call.name)}</code> · risk <b>{_e(summary.risk)}</b>")
    return head


def _tail(approval: Approval, summary: Summary) -> list[str]:
    tail = []
    if approval.kind == Approval.Kind.ACTION:
        if approval.confirmation_required:
            tail.append(f"Critical: approving it needs the confirmation <code>{_e(approval.confirmation_hint)}</code>.")
        if approval.route_id is not None:
            tail.append(f"{_e(route_need(approval))}, never the requester's.")
        elif approval.approver_required:
            tail.append("Four eyes: an approver other than the requester decides.")
    if approval.quorum > 1:
        tail.append(f"🗳 {_e(votes.summary(approval))}")
    if approval.escalated_at and approval.status == Approval.Status.PENDING:
        tail.append(f"Escalated at {approval.escalated_at:%H:%M} UTC: nobody decided it in time, so its escalation groups may too.")
    if summary.expires_at:
        extended = f" (extended by {_e(approval.extended_by.get_username())})" if approval.extended_by_id else ""
        tail.append(f"{summary.at_deadline} at {summary.expires_at:%Y-%m-%d %H:%M} UTC{summary.unless}{extended}")
    tail.append(_link(approval, "Open in hitl"))
    return tail


def _kept_off(approval: Approval) -> str:
    """Why the message carries the sentence only ("" when it carries the details): a kind or a
    question type Telegram cannot show or answer, or a risk the settings keep off Telegram."""
    if approval.kind == Approval.Kind.PLAN:
        return "Telegram does not show a plan's steps: open it in hitl to see them and approve it there."
    if approval.kind == Approval.Kind.QUESTION and (approval.question or {}).get("type") not in ANSWERABLE:
        return f"Telegram cannot answer a {_e((approval.question or {}).get('type'))} question: open it in hitl to answer it."
    if approval.kind not in (Approval.Kind.ACTION, Approval.Kind.QUESTION):
        return f"Telegram cannot show a {_e(approval.kind)}: open it in hitl to decide it."
    if approval.risk in settings.HITL_TELEGRAM_SENTENCE_ONLY_RISKS:
        return (f"Only the summary of a {_e(approval.risk)} risk call comes to Telegram: open it in hitl to see "
                "the whole call and decide it there.")
    return ""


def _details(approval: Approval, summary: Summary) -> tuple[str, str, str]:
    """(HTML before, the details as plain text, HTML after): the summary's preview and arguments,
    or a question's text and options (what its buttons and a typed reply answer)."""
    if approval.kind == Approval.Kind.QUESTION:
        return "", _question(approval.question), ""
    return "<pre>", summary.details, "</pre>"


def _typable(approval: Approval) -> bool:
    """A confirmation hint cut short cannot be typed: such a message is never complete."""
    return not approval.confirmation_required or len(reveal(approval.confirmation_hint)) <= MAX_LINE_CHARS


def _question(question: dict) -> str:
    text = reveal(question["text"])
    options = question.get("options") or []
    if question["type"] == "multi_choice" or (question["type"] == "choice" and option_labels(options)[1]):
        text += "\n\nOptions:\n" + "\n".join(f"{index}. {reveal_line(str(option))}" for index, option in enumerate(options, 1))
    return text


def _link(approval: Approval, words: str) -> str:
    return f'<a href="{escape(conversation_url(approval), quote=True)}">{words}</a>'


def _opens_on_a_phone(url: str) -> bool:
    """Whether a button may carry the site's address: a loopback one (a developer's machine) opens
    nothing on a phone, and the Bot API refuses a button to localhost; the text's link stays."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return bool(host)


def _join(head: list[str], detail: str | None, tail: list[str]) -> str:
    return "\n".join(head + ([] if detail is None else [detail]) + tail)


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
