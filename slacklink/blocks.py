"""What a Slack message shows: an approval request as Block Kit (every value from the model or a
tool as plain_text or preformatted rich text, never mrkdwn, so nothing in it formats, links or
mentions; invisible and direction-changing characters revealed as ⟨U+202E⟩; cut to Slack's limits
with a link to the site), its buttons, the same request once decided, and the modals that ask for a
reason, a confirmation or an answer. Pure but for reading the approval's rows."""
import json
import re

from django.conf import settings

from approvals import votes
from approvals.models import Approval
from approvals.outcomes import outcome_line
from approvals.templatetags.approval_tags import route_need
from hitl.visible import reveal, reveal_line

MAX_DETAIL = 2900  # a block's text may hold 3000 characters; the rest of the message is short
MAX_LINE = 300  # a one-line field: the agent, the tool, the reason, the hint
MAX_BUTTON = 75  # a button's or an option's label
MAX_BUTTONS = 5  # options shown as buttons; more become a select
MAX_OUTCOME = 1000
CUT = "… see the site"

# action_ids of the message's elements; a button's value is its rendering's token (SentVersion).
APPROVE, REJECT, REJECT_WITH_REASON, CHOOSE, SELECT, ANSWER, OPEN = (
    "approve", "reject", "reject_with_reason", "choose", "select", "answer", "open",
)
# callback_ids of the modals; their private_metadata is the token of the message they came from.
REASON_VIEW, CONFIRM_VIEW, ANSWER_VIEW = "hitl_reason", "hitl_confirm", "hitl_answer"


def request(approval: Approval, token: str) -> tuple[str, list[dict]]:
    """(notification text, blocks) of a pending request whose buttons carry `token`."""
    detail, whole = _detail_block(approval)
    blocks = _head(approval) + [detail] + _context(approval)
    return _notification(approval), blocks + [{"type": "actions", "block_id": "decide", "elements": buttons(approval, token, is_whole=whole)}]


def outcome(approval: Approval) -> tuple[str, list[dict]]:
    """The request as it was shown, without buttons, and under it what became of it."""
    line = _short(outcome_line(approval), MAX_OUTCOME)
    detail, _ = _detail_block(approval)
    blocks = _head(approval) + [detail] + _context(approval, decided=True) + [_plain(line, block_id="outcome")]
    return _mrkdwn_escape(f"{line} (#{approval.pk})"), blocks


def not_yours(approval: Approval) -> tuple[str, list[dict]]:
    """A copy whose reader may no longer decide it (an edit handed it to other approvers)."""
    line = "This call was edited and is now decided by others: see it on the site."
    detail, _ = _detail_block(approval)
    return _mrkdwn_escape(line), _head(approval) + [detail, _plain(line, block_id="outcome"), _open_link(approval)]


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


def counted_line(approval: Approval) -> str:
    return f"Your approval is counted: {votes.summary(approval)}."


def buttons(approval: Approval, token: str, *, is_whole: bool = True) -> list[dict]:
    """The elements of the request's actions block. A message that could not show the call whole
    only rejects: a press must never approve what was cut."""
    open_link = _button("Open on the site", OPEN, url=conversation_url(approval))
    if approval.kind == Approval.Kind.QUESTION:
        decline = _button("Reject (decline to answer)", REJECT, token, style="danger")
        if not is_whole:
            return [decline, open_link]
        question = approval.question
        if question["type"] == "confirm":
            return [_button("Yes", CHOOSE, f"0.{token}"), _button("No", CHOOSE, f"1.{token}"), decline, open_link]
        if question["type"] == "choice":
            labels = [reveal_line(str(option)) for option in question["options"]]
            if len(labels) <= MAX_BUTTONS and all(len(label) <= MAX_BUTTON for label in labels) and len(set(labels)) == len(labels):
                return [_button(label, CHOOSE, f"{index}.{token}") for index, label in enumerate(labels)] + [decline, open_link]
            options = [{"text": _text(f"{index + 1}. {_short(label, MAX_BUTTON - 5)}"), "value": f"{index}.{token}"}
                       for index, label in enumerate(labels)]
            select = {"type": "static_select", "action_id": SELECT, "placeholder": _text("Choose an answer"), "options": options}
            return [select, decline, open_link]
        return [_button("Answer…", ANSWER, token, style="primary"), decline, open_link]
    approve = "Approve (type the confirmation)" if approval.confirmation_required else "Approve"
    reject = [_button("Reject", REJECT, token, style="danger"), _button("Reject with reason", REJECT_WITH_REASON, token)]
    if not is_whole:
        return reject + [open_link]
    return [_button(approve, APPROVE, token, style="primary")] + reject + [open_link]


def reason_view(approval: Approval, token: str) -> dict:
    return _view(REASON_VIEW, f"Reject #{approval.pk}", "Reject", token, [
        _plain(f"Why reject {_call_name(approval)} (#{approval.pk})? The agent reads your reason."),
        _input("reason", "Reason", multiline=True, max_length=2000),
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


def _head(approval: Approval) -> list[dict]:
    agent = _line(approval.conversation.agent.name)
    if approval.kind == Approval.Kind.QUESTION:
        return [_plain(f"❓ {agent} asks (#{approval.pk})", block_id="head")]
    title = "Plan to approve" if approval.kind == Approval.Kind.PLAN else "Approval needed"
    fields = [f"Tool: {_call_name(approval)}", f"Risk: {_line(approval.risk)}", f"Agent: {agent}", f"Why: {_line(approval.reason)}"]
    return [
        _plain(f"🔔 {title} (#{approval.pk})", block_id="head"),
        {"type": "section", "block_id": "fields", "fields": [_text(field) for field in fields]},
    ]


def _context(approval: Approval, *, decided: bool = False) -> list[dict]:
    lines = []
    if approval.kind != Approval.Kind.QUESTION:
        if approval.confirmation_required:
            lines.append(f"Critical: approving it needs the confirmation {_line(approval.confirmation_hint)}")
        if approval.route_id is not None:
            lines.append(f"{route_need(approval)}, never the requester's.")
        elif approval.approver_required:
            lines.append("Four eyes: an approver other than the requester decides.")
        if approval.quorum > 1 and not decided:
            lines.append(f"🗳 {votes.summary(approval)}")
    if approval.expires_at and not decided:
        lines.append(f"Expires: {approval.expires_at:%Y-%m-%d %H:%M} UTC")
    elements = [_text(_short(line, MAX_OUTCOME)) for line in lines]
    return [{"type": "context", "block_id": "context", "elements": elements}] if lines else []


def _detail_block(approval: Approval) -> tuple[dict, bool]:
    """The preview (and every argument it does not show), the question or the plan, as literal
    preformatted text; cut to MAX_DETAIL, and whether nothing was cut (a hint too long to type counts as cut)."""
    text = _detail(approval)
    whole = _units(text) <= MAX_DETAIL and not (approval.confirmation_required and len(reveal(approval.confirmation_hint)) > MAX_LINE)
    if _units(text) > MAX_DETAIL:
        text = _cut_to(text, MAX_DETAIL - len(CUT) - 1) + "\n" + CUT
    element = {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": text}]}
    return {"type": "rich_text", "block_id": "detail", "elements": [element]}, whole


def _detail(approval: Approval) -> str:
    if approval.kind == Approval.Kind.QUESTION:
        question = approval.question
        text = reveal(question["text"])
        if question.get("options"):
            text += "\n\nOptions:\n" + "\n".join(f"{i}. {reveal_line(str(o))}" for i, o in enumerate(question["options"], 1))
        return text
    if approval.kind == Approval.Kind.PLAN:
        return "\n".join(f"{step['index']}. {reveal(str(step['action']))}" + (" (optional)" if step.get("optional") else "")
                         for step in approval.plan["steps"])
    arguments = approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
    if not approval.preview:
        return _json(arguments)
    preview = reveal(approval.preview["text"])
    unshown = {k: v for k, v in arguments.items() if not _displays(preview, v)} if isinstance(arguments, dict) else arguments
    return f"{preview}\n\nAlso in the call:\n{_json(unshown)}" if unshown else preview


def _json(value) -> str:
    return reveal(json.dumps(value, ensure_ascii=False, indent=1))


def _displays(preview: str, value) -> bool:
    """Whether the preview shows this argument's value whole (a fetch's preview names the host,
    not the path and query where a secret travels)."""
    if not isinstance(value, str):
        return False
    if not value:
        return True
    return any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", preview) for form in {reveal(value), reveal_line(value)})


def _notification(approval: Approval) -> str:
    what = "asks a question" if approval.kind == Approval.Kind.QUESTION else f"wants to run {_call_name(approval)}"
    return _mrkdwn_escape(f"{_line(approval.conversation.agent.name)} {what} (#{approval.pk}): decide in Slack or on the site")


def _call_name(approval: Approval) -> str:
    return _line(approval.tool_call.name)


def _open_link(approval: Approval) -> dict:
    return {"type": "actions", "block_id": "links", "elements": [_button("Open on the site", OPEN, url=conversation_url(approval))]}


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


def _input(name: str, label: str, *, multiline: bool = False, max_length: int = 3000) -> dict:
    element = {"type": "plain_text_input", "action_id": name, "multiline": multiline, "max_length": max_length}
    return {"type": "input", "block_id": name, "label": _text(label), "element": element}


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
