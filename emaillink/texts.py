"""What a mail and the link's page show, all from approvals.summary (the one summary of a call):
the head line as subject, why, the risk and the whole details (or, when they do not fit a mail,
that they were cut), every invisible or direction-changing character revealed (templates escape
the rest), and the outcome once decided."""
from django.conf import settings

from approvals.announcements import outcomes
from approvals.deciders import votes
from approvals.models import Approval
from approvals.summary import Summary, summarize
from core.visible import reveal, reveal_line

# The most details (preview and arguments) a mail carries whole; past it the mail says they were cut
# and the page the Approve link opens shows them. Mail clients clip long messages (Gmail at ~100 kB).
MAIL_DETAILS_LIMIT = 20_000

# Kinds whose mail has Approve and Reject links: the page shows and decides them. Any other kind (a
# question, a kind added later) is mailed as its sentence and a link to the conversation.
DECIDED_ON_THE_PAGE = (Approval.Kind.ACTION, Approval.Kind.PLAN)


def shown(approval: Approval) -> dict:
    """The call as a human reads it, for the mail's two parts and the page (the approval loaded with
    its tool call, conversation's agent and requester)."""
    summary = summarize(approval)
    steps = []
    if approval.kind == Approval.Kind.PLAN:
        steps = [reveal(str(step["action"])) + (" (optional)" if step.get("optional") else "") for step in approval.plan["steps"]]
    return {
        "approval": approval,
        "summary": summary,
        "fits": summary.fits(MAIL_DETAILS_LIMIT),
        "details_chars": f"{len(summary.details):,}",
        "decided_on_the_page": approval.kind in DECIDED_ON_THE_PAGE,
        "tool": reveal_line(approval.tool_call.name),
        "steps": steps,
        "critical": approval.confirmation_required,
        "confirmation_hint": reveal(approval.confirmation_hint),
        "four_eyes": approval.approver_required or approval.route_id is not None,
        "votes": votes.summary(approval) if approval.quorum > 1 else "",
        "site_url": conversation_url(approval),
    }


def subject(summary: Summary, *, reminder: bool = False) -> str:
    """The head line ("Approve? Write setup.sh (87 bytes) — asked by demo (Demo agent)"): what
    Approve does and who asked, readable in the inbox list."""
    return ("Reminder: still waiting · " if reminder else "") + summary.head


def warning_subject(summary: Summary) -> str:
    """"Expires at 12:34 UTC: Write setup.sh (87 bytes)"."""
    return f"{summary.at_deadline} at {summary.expires_at:%H:%M} UTC{summary.unless}: {summary.sentence}"


def link(token: str) -> str:
    return f"{settings.HITL_BASE_URL}/approve/{token}/"


def reject_link(token: str) -> str:
    # The query only picks the form; the token itself can only reject (approvals.tokens: complete=False).
    return f"{link(token)}?decision=reject"


def conversation_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def outcome_line(approval: Approval) -> str:
    """"Rejected by bob via api at 12:03 UTC: not now", on one line."""
    return outcomes.outcome_line(approval, icon=False, reveal_text=reveal_line)
