"""What the bot shows: an approval request (escaped, shortened; Telegram's HTML) with its buttons,
and the same request once decided, without buttons. Pure but for reading the approval's rows."""
import json
from html import escape

from django.conf import settings

from approvals.models import Approval
from approvals.questions import shown
from hitl.visible import reveal

MAX_DETAIL_CHARS = 1200
APPROVE, REJECT, REJECT_WITH_REASON, CHOOSE, TYPE = "a", "r", "R", "o", "t"
ICONS = {"approved": "✅", "rejected": "❌", "answered": "✅", "declined": "❌", "expired": "⌛", "cancelled": "⏹"}


def request_text(approval: Approval) -> str:
    call, agent = approval.tool_call, approval.conversation.agent
    lines = []
    if approval.kind == Approval.Kind.QUESTION:
        lines.append(f"❓ <b>{_e(agent.name)} asks</b> (#{approval.pk})")
        lines.append(_e(approval.question["text"]))
    else:
        title = "Plan to approve" if approval.kind == Approval.Kind.PLAN else "Approval needed"
        lines.append(f"🔔 <b>{title}</b> (#{approval.pk}) · {_e(agent.name)}")
        lines.append(f"Tool: <code>{_e(call.name)}</code> · risk <b>{_e(approval.risk)}</b>")
        lines.append(f"Why: {_e(approval.reason)}")
        lines.append(f"<pre>{_e(_cut(_detail(approval)))}</pre>")
        if approval.confirmation_required:
            lines.append(f"Critical: approving it needs the confirmation <code>{_e(approval.confirmation_hint)}</code>.")
        if approval.approver_required:
            lines.append("Four eyes: an approver other than the requester decides.")
    if approval.expires_at:
        lines.append(f"Expires: {approval.expires_at:%Y-%m-%d %H:%M} UTC")
    lines.append(f'<a href="{_e(conversation_url(approval))}">Open the conversation</a>')
    return "\n".join(lines)


def outcome_text(approval: Approval) -> str:
    """The request as it was shown, and under it what became of it."""
    return request_text(approval) + "\n\n" + _e(outcome_line(approval))


def outcome_line(approval: Approval) -> str:
    status = approval.status
    who = approval.decided_by.get_username() if approval.decided_by else None
    at = f" at {approval.decided_at:%H:%M} UTC" if approval.decided_at else ""
    if approval.decided_via == "rule":
        by = " by a rule"
    elif approval.decided_via == "repeat":
        by = " as a repeat of a rejected call"
    elif approval.decided_via == "timeout" or status == "expired":
        by = ""
    else:
        by = f" by {who or 'nobody'} via {approval.decided_via or 'the system'}"
    line = f"{ICONS.get(status, '')} {status.capitalize()}{by}{at}".strip()
    if approval.rejection_reason and status in ("rejected", "declined", "cancelled"):
        line += f": {reveal(approval.rejection_reason)}"
    if status == "answered" and approval.answer is not None:
        line += f": {reveal(shown(approval.answer))}"
    return line


def buttons(approval: Approval, token: str) -> list[list[tuple[str, str]]]:
    if approval.kind == Approval.Kind.QUESTION:
        question = approval.question
        if question["type"] == "confirm":
            return [[("Yes", f"{CHOOSE}0:{token}"), ("No", f"{CHOOSE}1:{token}")], [("Reject (decline to answer)", f"{REJECT}:{token}")]]
        if question["type"] == "choice":
            rows = [[(option[:60], f"{CHOOSE}{index}:{token}")] for index, option in enumerate(question["options"])]
            return rows + [[("Reject (decline to answer)", f"{REJECT}:{token}")]]
        return [[("Answer (type it)", f"{TYPE}:{token}")], [("Reject (decline to answer)", f"{REJECT}:{token}")]]
    approve = "Approve (type the confirmation)" if approval.confirmation_required else "Approve"
    return [[(approve, f"{APPROVE}:{token}"), ("Reject", f"{REJECT}:{token}")], [("Reject with reason", f"{REJECT_WITH_REASON}:{token}")]]


def conversation_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def _detail(approval: Approval) -> str:
    """The preview, or else the arguments (the edited ones, if an approver edited them)."""
    if approval.kind == Approval.Kind.PLAN:
        return "\n".join(f"{step['index']}. {step['action']}" + (" (optional)" if step.get("optional") else "") for step in approval.plan["steps"])
    if approval.preview:
        return reveal(approval.preview["text"])
    arguments = approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
    return reveal(json.dumps(arguments, ensure_ascii=False, indent=1))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + f"\n… ({len(text) - MAX_DETAIL_CHARS} more characters on the site)"


def _e(text) -> str:
    return escape(reveal(str(text)), quote=True)
