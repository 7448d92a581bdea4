"""What a notification says: the tool, its risk and a one-line summary (every invisible or
direction-changing character revealed, cut to fit a notification), the actions it offers, and the
outcome that replaces it. Plain data: the service worker renders it."""
import json

from django.conf import settings

from approvals import outcomes
from approvals.models import Approval
from hitl.visible import reveal_line

MAX_SUMMARY_CHARS = 160
MAX_TITLE_CHARS = 80
VERBS = {"approved": "Approved", "rejected": "Rejected", "answered": "Answered", "declined": "Declined",
         "expired": "Expired", "cancelled": "Cancelled"}


def offers_actions(approval: Approval) -> bool:
    """Approve and Reject from the notification only for a plain call one person decides. A critical
    call needs its typed confirmation, a four-eyes or routed call (or one needing several approvals)
    deserves the whole card, and a question or a plan is answered on the site: those offer View only."""
    return (
        approval.kind == Approval.Kind.ACTION
        and not approval.confirmation_required
        and not approval.approver_required
        and approval.route_id is None
        and approval.quorum <= 1
    )


def tag(approval: Approval) -> str:
    """One notification per approval on a device: the outcome replaces the request."""
    return f"approval-{approval.pk}"


def view_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def request(approval: Approval, tokens: dict[str, str] | None) -> dict:
    """The notification of a pending approval; `tokens` ({"approve": ..., "reject": ...}) or None for View only."""
    call, agent = approval.tool_call, approval.conversation.agent
    if approval.kind == Approval.Kind.QUESTION:
        title = f"{agent.name} asks"
    else:
        title = f"{call.name} · {approval.risk} risk"
    why = []
    if approval.confirmation_required:
        why.append("critical: confirm on the site")
    elif approval.route_id is not None or approval.approver_required or approval.quorum > 1:
        why.append("four eyes: decide on the site")
    actions = [{"action": "approve", "title": "Approve"}, {"action": "reject", "title": "Reject"}] if tokens else []
    return {
        "type": "request",
        "approval_id": approval.pk,
        "tag": tag(approval),
        "title": _short(reveal_line(title), MAX_TITLE_CHARS),
        "body": _short(" · ".join([f"#{approval.pk} {reveal_line(agent.name)}: {summary(approval)}", *why]), MAX_SUMMARY_CHARS + 80),
        "url": view_url(approval),
        "actions": actions + [{"action": "view", "title": "View"}],
        "tokens": tokens or {},
    }


def decided(approval: Approval) -> dict:
    """What replaces the request once it is decided, wherever it was."""
    return {
        "type": "decided",
        "approval_id": approval.pk,
        "tag": tag(approval),
        "title": _short(f"{VERBS.get(approval.status, approval.status)}: {reveal_line(approval.tool_call.name)}", MAX_TITLE_CHARS),
        "body": outcome_line(approval),
        "url": view_url(approval),
        "actions": [{"action": "view", "title": "View"}],
        "tokens": {},
    }


def summary(approval: Approval) -> str:
    """One line: a question's text, the preview's first line, else the arguments as JSON."""
    if approval.kind == Approval.Kind.QUESTION:
        text = str((approval.question or {}).get("text", ""))
    elif approval.kind == Approval.Kind.PLAN:
        text = str((approval.plan or {}).get("title", "a plan"))
    elif approval.preview and str(approval.preview.get("text") or "").strip():
        text = str(approval.preview["text"]).strip().splitlines()[0]
    else:
        arguments = approval.edited_arguments if approval.is_edited else approval.tool_call.arguments
        text = json.dumps(arguments, ensure_ascii=False)
    return _short(reveal_line(text), MAX_SUMMARY_CHARS)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def outcome_line(approval: Approval) -> str:
    return _short(outcomes.outcome_line(approval, icon=False, reveal_text=reveal_line), MAX_SUMMARY_CHARS + 80)
