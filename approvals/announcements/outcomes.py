"""What became of an approval, in one line, for every surface that tells people outside the site
(Telegram, Slack, an email's page, a notification): "✅ Approved by alice via slack at 12:03 UTC"."""
from core.visible import reveal

from ..models import Approval
from ..pauses.questions import shown

ICONS = {"approved": "✅", "rejected": "❌", "answered": "✅", "declined": "❌", "expired": "⌛", "cancelled": "⏹"}


def outcome_line(approval: Approval, *, icon: bool = True, reveal_text=reveal) -> str:
    """How it ended, by whom, via what and when, with a rejection's reason or the answer given.
    `reveal_text` shows what a person wrote with its invisible characters revealed (a surface that
    keeps to one line passes core.visible.reveal_line)."""
    status = approval.status
    who = approval.decided_by.get_username() if approval.decided_by_id else None
    at = f" at {approval.decided_at:%H:%M} UTC" if approval.decided_at else ""
    if approval.decided_via == Approval.Via.RULE:
        by = " by a rule"
    elif approval.decided_via == Approval.Via.POLICY:
        by = " by the agent's policy"
    elif approval.decided_via == Approval.Via.REVIEWER:
        by = f" by the AI reviewer ({reveal_text(approval.reviewer_model)})"
    elif approval.decided_via == Approval.Via.REPEAT:
        by = " as a repeat of a rejected call"
    elif approval.decided_via == Approval.Via.TIMEOUT and status != Approval.Status.EXPIRED:
        by = " at its deadline, as its agent's timeout setting says"
    elif approval.decided_via in (Approval.Via.TIMEOUT, "") or status == Approval.Status.EXPIRED:
        by = ""
    else:
        by = f" by {reveal_text(who) if who else 'nobody'} via {approval.decided_via}"
    line = f"{ICONS.get(status, '') if icon else ''} {status.capitalize()}{by}{at}".strip()
    if approval.rejection_reason and status in (Approval.Status.REJECTED, Approval.Status.DECLINED, Approval.Status.CANCELLED):
        line += f": {reveal_text(approval.rejection_reason)}"
    if status == Approval.Status.ANSWERED and approval.answer is not None:
        line += f": {reveal_text(shown(approval.answer))}"
    return line
