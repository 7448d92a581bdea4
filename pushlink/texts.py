"""What a notification says, made from the one summary of the call (approvals.summary): the title
asks and names the risk, the body says in words what Approve does and who asked, then the whole
details when they fit. Approve is offered only when the notification shows the whole call; a
notification that shows it cut (too long, or a risk that carries the sentence only) offers
"Approve on the site" and Reject, whose token can reject, never approve. Plain data: the service
worker renders it."""
from django.conf import settings

from approvals.announcements import outcomes
from approvals.models import Approval
from approvals.summary import Summary
from core.visible import reveal_line

# The most of the sentence and details a notification carries whole. Android shows an expanded
# notification's body in about eight lines of forty characters, desktop Chrome (Windows, GNOME)
# about as much once expanded: past ~300 characters a person no longer sees the call whole, so
# Approve would decide what was not read. The encrypted payload (4 KB) holds far more.
NOTIFICATION_LIMIT = 300
MAX_TITLE_CHARS = 80
MAX_LINE_CHARS = 240  # an outcome's line
ASK = {Approval.Kind.ACTION: "Approve?", Approval.Kind.QUESTION: "Answer?", Approval.Kind.PLAN: "Approve the plan?"}
VERBS = {"approved": "Approved", "rejected": "Rejected", "answered": "Answered", "declined": "Declined",
         "expired": "Expired", "cancelled": "Cancelled"}


def offers_actions(approval: Approval) -> bool:
    """Approve and Reject from the notification only for a plain call one person decides. A critical
    call needs its typed confirmation, a four-eyes or routed call (or one needing several approvals)
    deserves the whole card, and a question, a plan or any other kind is answered on the site: those
    offer View only."""
    return (
        approval.kind == Approval.Kind.ACTION
        and not approval.confirmation_required
        and not approval.approver_required
        and approval.route_id is None
        and approval.quorum <= 1
    )


def sentence_only(summary: Summary) -> bool:
    """Privacy-minimal: for these risks the lock screen shows what the call does, never its arguments."""
    return summary.risk in settings.HITL_PUSH_SENTENCE_ONLY_RISKS


def shows_whole(summary: Summary) -> bool:
    """Whether the notification carries the whole call (sentence and details), so it may approve."""
    return summary.kind == Approval.Kind.ACTION and not sentence_only(summary) and summary.fits(NOTIFICATION_LIMIT)


def tag(approval: Approval) -> str:
    """One notification per approval on a device: the warning and the outcome replace the request."""
    return f"approval-{approval.pk}"


def view_url(approval: Approval) -> str:
    return f"{settings.HITL_BASE_URL}/conversations/{approval.conversation_id}/#tool-call-{approval.tool_call_id}"


def request(approval: Approval, summary: Summary, tokens: dict[str, str] | None) -> dict:
    """The notification of a pending approval. `tokens`: {"approve": ..., "reject": ...} when the
    whole call is shown, {"reject": ...} when it is cut, None for View only."""
    tokens = tokens or {}
    whole = shows_whole(summary)
    ask = ASK.get(summary.kind)
    body = [first_line(summary)]
    if summary.kind != Approval.Kind.ACTION:  # a question, a plan, a kind added later: on the site
        body.append(f"Open in hitl to {'answer' if summary.kind == Approval.Kind.QUESTION else 'decide'}.")
    elif whole:
        body.append(summary.details)
    elif sentence_only(summary):
        body.append("Open hitl to see the whole call" + (" and approve it." if tokens else "."))
    else:
        cut = max(NOTIFICATION_LIMIT - len(summary.sentence), 0)
        body.append(_short(summary.details, cut) + "\n(Cut: open hitl to see the whole call" + (" and approve it.)" if tokens else ".)"))
    if not tokens and summary.kind == Approval.Kind.ACTION:
        body.append(_why_on_the_site(approval))
    actions = []
    if "approve" in tokens:
        actions.append({"action": "approve", "title": "Approve"})
    elif tokens:
        actions.append({"action": "open", "title": "Approve on the site"})
    if "reject" in tokens:
        actions.append({"action": "reject", "title": "Reject…"})
    return {
        "type": "request",
        "approval_id": approval.pk,
        "tag": tag(approval),
        "title": _short(f"{ask or 'Open in hitl'} · {summary.risk} risk", MAX_TITLE_CHARS),
        "body": "\n\n".join(part for part in body if part),
        "complete": whole,
        "url": view_url(approval),
        "actions": actions + [{"action": "view", "title": "View"}],
        "tokens": tokens,
    }


def warning(approval: Approval, summary: Summary, extend_token: str | None) -> dict:
    """The warning that replaces the request as its deadline nears: when it expires, what it does;
    View to decide on the site, and Extend when its recipient may push the deadline back."""
    at = approval.expires_at.strftime("%H:%M UTC") if approval.expires_at else "soon"
    actions = [{"action": "extend", "title": "Extend"}] if extend_token else []
    return {
        "type": "warning",
        "approval_id": approval.pk,
        "tag": tag(approval),
        "title": _short(f"Expires at {at}: {summary.sentence}", MAX_TITLE_CHARS),
        "body": f"{first_line(summary)}\n\nDecide it on the site before then" + (", or extend its deadline." if extend_token else "."),
        "complete": False,
        "url": view_url(approval),
        "actions": actions + [{"action": "view", "title": "View"}],
        "tokens": {"extend": extend_token} if extend_token else {},
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


def first_line(summary: Summary) -> str:
    """The sentence and who asked: what a person reads first."""
    return f"{summary.sentence} — asked by {summary.asked_by}"


def _why_on_the_site(approval: Approval) -> str:
    if approval.confirmation_required:
        return "Critical: confirm it on the site."
    if approval.route_id is not None or approval.approver_required or approval.quorum > 1:
        return "Four eyes: decide it on the site."
    return ""


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def outcome_line(approval: Approval) -> str:
    return _short(outcomes.outcome_line(approval, icon=False, reveal_text=reveal_line), MAX_LINE_CHARS)
