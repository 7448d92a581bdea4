"""What a Slack message shows: an approval request rendered from its one summary
(approvals.summary: the sentence and who asked as its head, why, and the whole details when they
fit Slack's limits, else cut with a link to the site), its buttons, the same request once decided,
the warning before its deadline, and the modals that ask for a reason, a confirmation or an answer.
Every value from the model or a tool is plain_text or preformatted rich text, never mrkdwn, so
nothing in it formats, links or mentions; invisible characters are revealed as ⟨U+202E⟩ by the
summary. Pure but for reading the approval's rows."""
import math
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from approvals.deciders import votes
from approvals.models import Approval
from approvals.pauses import questions
from approvals.policy import timeouts
from approvals.announcements.outcomes import outcome_line
from approvals.summary import Summary, summarize
from approvals.templatetags.approval_tags import route_need
from core.visible import reveal, reveal_line

MAX_DETAIL = 2900  # a block's text may hold 3000 characters: the details go in blocks of this many
# The most details a message carries whole: a few blocks (a message may hold 50), and small enough
# that the interaction payload (Slack sends the whole message back with each press) stays far below
# views.MAX_BODY. Past it the message shows the first block, says it was cut, and cannot approve.
MAX_DETAILS = 12_000
MAX_CUT_SHOWN = 1200  # of details too long for Slack, the beginning shown (the rest is on the site)
MAX_LINE = 300  # a one-line field: the reason, the hint
MAX_HEAD = 2900
MAX_BUTTON = 75  # a button's or an option's label
MAX_BUTTONS = 5  # options shown as buttons; more become a select
MAX_OUTCOME = 1000
CUT = "… cut here: the rest is on the site"
# Question types a message answers itself (buttons, a select, a modal); any other goes out generic.
ANSWERABLE = {"text", "choice", "multi_choice", "number", "date", "confirm"}

# action_ids of the message's elements; a button's value is its rendering's token (SentVersion).
APPROVE, REJECT, REJECT_WITH_REASON, CHOOSE, SELECT, ANSWER, OPEN, EXTEND = (
    "approve", "reject", "reject_with_reason", "choose", "select", "answer", "open", "extend",
)
# callback_ids of the modals; their private_metadata is the token of the message they came from.
REASON_VIEW, CONFIRM_VIEW, ANSWER_VIEW = "hitl_reason", "hitl_confirm", "hitl_answer"


class Form:
    """How much of a call a message carries: everything (whole or cut to fit), the sentence only
    (HITL_SLACK_SENTENCE_ONLY_RISKS), or a generic notice for a kind it cannot show or answer."""

    DETAILS, SENTENCE_ONLY, GENERIC = "details", "sentence only", "generic"


@dataclass(frozen=True)
class Shown:
    """What a request's message shows of its summary, and whether that is everything Approve decides."""

    summary: Summary
    form: str
    detail: str  # the text of its detail blocks ("" for the sentence only and generic forms)
    complete: bool


def shown(approval: Approval) -> Shown:
    """What a message of `approval` shows. Only a complete one has an Approve (or answer) button,
    and only a press through a complete one may approve (SentVersion.complete, checked by
    approvals.services): a cut, sentence-only or generic message can reject or decline, never approve."""
    summary = summarize(approval)
    if _is_generic(approval):
        return Shown(summary, Form.GENERIC, "", complete=False)
    if approval.risk in settings.HITL_SLACK_SENTENCE_ONLY_RISKS:
        return Shown(summary, Form.SENTENCE_ONLY, "", complete=False)
    if approval.kind == Approval.Kind.QUESTION:
        detail = _question(approval)
        fits = len(detail) <= MAX_DETAILS
    else:
        detail = summary.details
        fits = summary.fits(MAX_DETAILS) and len(summary.head) <= MAX_HEAD
    hint_fits = not approval.confirmation_required or len(reveal(approval.confirmation_hint)) <= MAX_LINE
    return Shown(summary, Form.DETAILS, detail, complete=fits and hint_fits)


def request(approval: Approval, token: str, view: Shown | None = None) -> tuple[str, list[dict]]:
    """(notification text, blocks) of a pending request whose buttons carry `token`."""
    view = view or shown(approval)
    blocks = _head(approval, view) + _body(view) + _context(approval, view)
    return _notification(view), blocks + [{"type": "actions", "block_id": "decide", "elements": buttons(approval, token, view)}]


def outcome(approval: Approval, *, was_whole: bool) -> tuple[str, list[dict]]:
    """The request without buttons, and under it what became of it (an expired one links to its
    card on the site, where it can be asked again). Its details stay only if the message showed
    them whole: a cut or sentence-only message never gains what it did not carry."""
    view = shown(approval)
    line = _short(outcome_line(approval), MAX_OUTCOME)
    body = _body(view) if was_whole else []
    blocks = _head(approval, view) + body + _context(approval, view, decided=True) + [_plain(line, block_id="outcome")]
    if approval.status == Approval.Status.EXPIRED:
        blocks.append(_open_link(approval, "Open in hitl to ask again"))
    return _mrkdwn_escape(f"{line} (#{approval.pk})"), blocks


def not_yours(approval: Approval) -> tuple[str, list[dict]]:
    """A copy whose reader may no longer decide it (an edit handed it to other approvers): the
    sentence of the call as it stands, its details on the site."""
    line = "This call was edited and is now decided by others: see it on the site."
    view = shown(approval)
    content = _head(approval, view) + _context(approval, view, decided=True)
    return _mrkdwn_escape(line), content + [_plain(line, block_id="outcome"), _open_link(approval)]


def too_late(approval: Approval) -> str:
    """What a late press hears: "too late: rejected by bob via api at 12:03 UTC"."""
    line = outcome_line(approval, icon=False)
    return f"too late: {line[:1].lower()}{line[1:]}"


def reminder(approval: Approval) -> str:
    """The one "still waiting" reply under a routed request whose reminder is due (mrkdwn: escaped)."""
    count = f" ({votes.summary(approval)})" if approval.quorum > 1 else ""
    return _mrkdwn_escape(
        f"⏰ Reminder: still waiting for a decision on #{approval.pk} · {_call_name(approval)}, requested at "
        f"{approval.requested_at:%H:%M} UTC{count}. Decide with the buttons above or on the site: "
    ) + f"<{conversation_url(approval)}|open the conversation>"


def warning(approval: Approval, token: str, *, now=None) -> tuple[str, list[dict]]:
    """The reply under a request whose deadline is near: when it expires, and an Extend button
    (once: an approval extended already has none)."""
    line = f"{expires_in(approval, now=now)}: decide it above, or extend its deadline once."
    elements = [] if approval.extended_at else [_button("Extend", EXTEND, token, style="primary")]
    elements.append(_button("Open on the site", OPEN, url=conversation_url(approval)))
    blocks = [_plain(line, block_id="warning"), {"type": "actions", "block_id": "extend", "elements": elements}]
    return _mrkdwn_escape(f"{line} (#{approval.pk})"), blocks


def expires_in(approval: Approval, *, now=None) -> str:
    """"Expires at 12:34 UTC (in 3 min)"."""
    left = (approval.expires_at - (now or timezone.now())).total_seconds()
    minutes = math.ceil(left / 60)
    when = "in less than a minute" if left < 60 else f"in {minutes} min"
    if left <= 0:
        return f"Expired at {approval.expires_at:%H:%M} UTC"
    unless = "" if approval.timeout_action == timeouts.EXPIRE else " if no one decides"
    return f"{timeouts.described(approval.timeout_action)} at {approval.expires_at:%H:%M} UTC ({when}){unless}"


def extended_line(approval: Approval) -> str:
    return f"Extended: #{approval.pk} now expires at {approval.expires_at:%H:%M} UTC."


def counted_line(approval: Approval) -> str:
    return f"Your approval is counted: {votes.summary(approval)}."


def buttons(approval: Approval, token: str, view: Shown) -> list[dict]:
    """The elements of the request's actions block. Reject always asks for a reason (a modal);
    Approve and the answers are there only when the message showed the call whole."""
    open_link = _button("Open on the site", OPEN, url=conversation_url(approval))
    if view.form == Form.GENERIC:
        return [_button("Open in hitl", OPEN, url=conversation_url(approval), style="primary")]
    if approval.kind == Approval.Kind.QUESTION:
        decline = _button("Reject (decline to answer)", REJECT, token, style="danger")
        if not view.complete:
            return [decline, open_link]
        question = approval.question
        if question["type"] == "confirm":
            yes, no = (reveal_line(label) for label in questions.labels(question))
            return [_button(yes, CHOOSE, f"0.{token}"), _button(no, CHOOSE, f"1.{token}"), decline, open_link]
        if question["type"] == "choice":
            labels = [reveal_line(str(option)) for option in question["options"]]
            if len(labels) <= MAX_BUTTONS and all(len(label) <= MAX_BUTTON for label in labels) and len(set(labels)) == len(labels):
                return [_button(label, CHOOSE, f"{index}.{token}") for index, label in enumerate(labels)] + [decline, open_link]
            options = [{"text": _text(f"{index + 1}. {_short(label, MAX_BUTTON - 5)}"), "value": f"{index}.{token}"}
                       for index, label in enumerate(labels)]
            select = {"type": "static_select", "action_id": SELECT, "placeholder": _text("Choose an answer"), "options": options}
            return [select, decline, open_link]
        return [_button("Answer…", ANSWER, token, style="primary"), decline, open_link]
    reject = _button("Reject", REJECT, token, style="danger")
    if not view.complete:
        return [reject, open_link]
    approve = "Approve (type the confirmation)" if approval.confirmation_required else "Approve"
    return [_button(approve, APPROVE, token, style="primary"), reject, open_link]


def reason_view(approval: Approval, token: str) -> dict:
    """Reject's modal: the reason is optional, but the question is always asked."""
    if approval.kind == Approval.Kind.QUESTION:
        title, ask = f"Decline #{approval.pk}", "Why decline to answer? The agent reads your reason (optional)."
    else:
        title, ask = f"Reject #{approval.pk}", "Why reject it? The agent reads your reason (optional)."
    sentence = summarize(approval).sentence
    return _view(REASON_VIEW, title, "Reject", token, [
        _plain(_short(f"{sentence}\n\n{ask}", MAX_DETAIL)),
        _input("reason", "Reason", multiline=True, max_length=2000, optional=True),
    ])


def confirm_view(approval: Approval, token: str) -> dict:
    hint = reveal(approval.confirmation_hint)
    return _view(CONFIRM_VIEW, f"Approve #{approval.pk}", "Approve", token, [
        _plain(f"{_call_name(approval)} (#{approval.pk}) is critical. Type {_short(hint, MAX_LINE)} exactly to approve it."),
        _input("confirmation", "Confirmation", max_length=500),
    ])


def answer_view(approval: Approval, token: str) -> dict:
    question = approval.question
    ask = _short(reveal(question["text"]), 2000)
    if question.get("options"):
        ask += "\nOptions (separate several with commas): " + ", ".join(reveal_line(str(o)) for o in question["options"])
    return _view(ANSWER_VIEW, f"Answer #{approval.pk}", "Answer", token, [
        _plain(_short(ask, 2900)), _input("answer", "Your answer", multiline=question["type"] == "text", max_length=3000),
    ])


def conversation_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def _is_generic(approval: Approval) -> bool:
    if approval.kind == Approval.Kind.QUESTION:
        return (approval.question or {}).get("type") not in ANSWERABLE
    return approval.kind != Approval.Kind.ACTION


def _head(approval: Approval, view: Shown) -> list[dict]:
    """The summary's head ("Approve? Write setup.sh (87 bytes) — asked by demo (Demo agent)"), then why."""
    summary = view.summary
    fields = [f"Risk: {_line(summary.risk)}", f"Tool: {_call_name(approval)}"]
    return [
        _plain(_short(summary.head, MAX_HEAD), block_id="head"),
        {"type": "section", "block_id": "why", "text": _text(f"Why: {_short(summary.why, MAX_LINE)}"), "fields": [_text(f) for f in fields]},
    ]


def _body(view: Shown) -> list[dict]:
    """The details as preformatted text in as many blocks as they need; a cut message shows the
    first block of them and says so."""
    if view.form != Form.DETAILS:
        return []
    pieces = _pieces(view.detail, MAX_DETAIL)
    if not view.complete and len(view.detail) > MAX_DETAILS:
        pieces = [_cut_to(pieces[0], MAX_CUT_SHOWN) + "\n" + CUT]
    return [{"type": "rich_text", "block_id": f"detail-{number}", "elements": [
        {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": piece or " "}]}]}
        for number, piece in enumerate(pieces, 1)]


def _context(approval: Approval, view: Shown, *, decided: bool = False) -> list[dict]:
    lines = []
    if not decided:
        if view.form == Form.SENTENCE_ONLY:
            lines.append(f"For {_line(approval.risk)} risk, Slack gets the sentence only: open the site to see the whole call and approve it.")
        elif view.form == Form.GENERIC:
            lines.append("Slack cannot show this request: open it in hitl to see and decide it.")
        elif not view.complete:
            lines.append("Cut: the call is too long for Slack. Open the site to see it whole and approve it; here you can only reject it.")
    if approval.kind == Approval.Kind.ACTION:
        if approval.confirmation_required:
            lines.append(f"Critical: approving it needs the confirmation {_line(approval.confirmation_hint)}")
        if approval.route_id is not None:
            lines.append(f"{route_need(approval)}, never the requester's.")
        elif approval.approver_required:
            lines.append("Four eyes: an approver other than the requester decides.")
        if approval.quorum > 1 and not decided:
            lines.append(f"🗳 {votes.summary(approval)}")
    if approval.expires_at and not decided:
        extended = f", extended by {reveal_line(approval.extended_by.get_username())}" if approval.extended_by_id else ""
        lines.append(f"Expires at {approval.expires_at:%Y-%m-%d %H:%M} UTC{extended}")
    lines.append(f"Request #{approval.pk}")
    elements = [_text(_short(line, MAX_OUTCOME)) for line in lines]
    return [{"type": "context", "block_id": "context", "elements": elements}]


def _question(approval: Approval) -> str:
    question = approval.question
    text = reveal(question["text"])
    if question.get("options"):
        text += "\n\nOptions:\n" + "\n".join(f"{i}. {reveal_line(str(o))}" for i, o in enumerate(question["options"], 1))
    return text


def _pieces(text: str, size: int) -> list[str]:
    """`text` in pieces of at most `size` UTF-16 units (as Slack counts), each ending at the end of
    a line where one is near; nothing is lost between them."""
    pieces = []
    while _units(text) > size:
        piece = _cut_to(text, size)  # half a surrogate pair is dropped here and starts the next piece
        newline = piece.rfind("\n")
        if newline > len(piece) // 2:
            pieces.append(piece[:newline])
            text = text[newline + 1:]
        else:
            pieces.append(piece)
            text = text[len(piece):]
    return [*pieces, text]


def _notification(view: Shown) -> str:
    """What the notification says: the head a person reads in one second."""
    return _mrkdwn_escape(_short(view.summary.head, MAX_LINE))


def _call_name(approval: Approval) -> str:
    return _line(approval.tool_call.name)


def _open_link(approval: Approval, label: str = "Open on the site") -> dict:
    return {"type": "actions", "block_id": "links", "elements": [_button(label, OPEN, url=conversation_url(approval))]}


def _button(label: str, action_id: str, value: str = "", *, style: str = "", url: str = "") -> dict:
    button = {"type": "button", "action_id": action_id, "text": _text(_short(label, MAX_BUTTON))}
    if value:
        button["value"] = value
    if url:
        button["url"] = url
    if style:
        button["style"] = style
    return button


def _view(callback_id: str, title: str, submit: str, token: str, blocks: list[dict]) -> dict:
    return {"type": "modal", "callback_id": callback_id, "private_metadata": token, "title": _text(title[:24]),
            "submit": _text(submit), "close": _text("Cancel"), "blocks": blocks}


def _input(name: str, label: str, *, multiline: bool = False, max_length: int = 3000, optional: bool = False) -> dict:
    element = {"type": "plain_text_input", "action_id": name, "multiline": multiline, "max_length": max_length}
    return {"type": "input", "block_id": name, "label": _text(label), "element": element, "optional": optional}


def _plain(text: str, *, block_id: str = "") -> dict:
    block = {"type": "section", "text": _text(text)}
    if block_id:
        block["block_id"] = block_id
    return block


def _text(text: str) -> dict:
    """Literal text: Slack formats, links and mentions nothing in it (no mrkdwn, no emoji codes)."""
    return {"type": "plain_text", "text": text or " ", "emoji": False}


def _line(value) -> str:
    return _short(reveal_line(str(value)), MAX_LINE)


def _mrkdwn_escape(text: str) -> str:
    """The notification text is read as mrkdwn: the three characters Slack asks to escape."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _cut_to(text: str, units: int) -> str:
    return text.encode("utf-16-le")[: max(units, 0) * 2].decode("utf-16-le", errors="ignore")


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
