"""The decision controls of a tool card and its claim line: shared by the chat card and the dashboard rows."""
from django.template.loader import render_to_string

from ..models import Approval


def approval_controls_html(
    approval: Approval, *, can_decide: bool | None, via: str = Approval.Via.CHAT, error: str = "", saved_rule=None,
    can_reject: bool | None = None, voted: bool = False,
) -> str:
    """`can_decide`: whether the viewer may approve (None: unknown, for a push to many viewers).
    `can_reject`: whether they may reject (None: unknown; everyone who sees an unrouted call may, a
    routed call only its groups and its owner). `voted`: their approve already counts toward the
    quorum. `saved_rule`: the rule this decision just saved ("Always…"), told once, to its maker."""
    context = {
        "approval": approval, "can_decide": can_decide, "can_reject": can_reject, "voted": voted, "via": via,
        "error": error, "saved_rule": saved_rule,
    }
    return render_to_string("partials/approval_controls.html", context)


def dashboard_signal_html(event: str, count: int = 1, ids: list[int] = ()) -> str:
    """Tells open dashboards that `count` approvals changed; each re-reads its own filtered list, or,
    told which ones were decided (`ids`), takes their rows out in place."""
    return render_to_string("partials/dashboard_signal.html", {"event": event, "count": count, "ids": ids})


def claim_html(approval: Approval, *, can_decide: bool | None, via: str = Approval.Via.CHAT, oob: bool = False) -> str:
    """A card's claim line ("claimed by bob", Claim / Unclaim), as the card and the row include it.
    Who claimed it is the same for every viewer, so one render is pushed to all (`can_decide` None)."""
    context = {"approval": approval, "can_decide": can_decide, "via": via, "oob": oob}
    return render_to_string("partials/approval_claim.html", context)


def votes_html(approval: Approval, *, oob: bool = False) -> str:
    """A routed card's votes line ("1 of 2 approvals: bob", "escalated"): the same for every viewer,
    so one render is pushed to all when someone votes or the call escalates."""
    return render_to_string("partials/approval_votes.html", {"approval": approval, "oob": oob})
