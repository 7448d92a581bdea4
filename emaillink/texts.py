"""What a mail and the link's page show: the tool, agent, risk and reason, the preview and the
arguments, every invisible or direction-changing character revealed (templates escape the rest),
and the outcome once decided."""
from django.conf import settings

from approvals import outcomes, votes
from approvals.models import Approval
from hitl.visible import reveal, reveal_json, reveal_line

def shown(approval: Approval) -> dict:
    """The call as a human reads it, for the mail's two parts and the page."""
    call, agent = approval.tool_call, approval.conversation.agent
    arguments = approval.edited_arguments if approval.is_edited else call.arguments
    steps = []
    if approval.kind == Approval.Kind.PLAN:
        steps = [reveal(str(step["action"])) + (" (optional)" if step.get("optional") else "") for step in approval.plan["steps"]]
    return {
        "approval": approval,
        "tool": reveal_line(call.name),
        "agent": reveal_line(agent.name),
        "risk": approval.risk,
        "reason": reveal(approval.reason or ""),
        "preview": reveal(str(approval.preview["text"])) if approval.preview and approval.preview.get("text") else "",
        "arguments": reveal_json(arguments),
        "steps": steps,
        "critical": approval.confirmation_required,
        "confirmation_hint": reveal(approval.confirmation_hint),
        "four_eyes": approval.approver_required or approval.route_id is not None,
        "votes": votes.summary(approval) if approval.quorum > 1 else "",
        "expires_at": approval.expires_at,
        "site_url": conversation_url(approval),
    }


def subject(approval: Approval) -> str:
    kind = "Plan to approve" if approval.kind == Approval.Kind.PLAN else "Approval needed"
    return f"{kind}: {reveal_line(approval.tool_call.name)} ({approval.risk} risk) · #{approval.pk}"[:200]


def link(token: str) -> str:
    return f"{settings.HITL_BASE_URL}/approve/{token}/"


def conversation_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def outcome_line(approval: Approval) -> str:
    """"Rejected by bob via api at 12:03 UTC: not now", on one line."""
    return outcomes.outcome_line(approval, icon=False, reveal_text=reveal_line)
