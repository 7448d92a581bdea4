from django import template

from approvals.inbox import voted
from approvals.permissions import can_decide
from approvals.selectors import powers_for

register = template.Library()


@register.simple_tag(takes_context=True)
def viewer_may(context, approval) -> dict:
    """What the viewer of this page may do with `approval` (the decision service checks again):
    `decide` (approve: not once their vote counts), `reject`, and whether they `voted`. One Powers
    for the whole render (stashed on the request), however many cards."""
    request = context["request"]
    powers = powers_for(request)
    has_voted = voted(request.user, approval)
    return {
        "decide": not has_voted and can_decide(request.user, approval, powers=powers),
        "reject": can_decide(request.user, approval, approve=False, powers=powers),
        "voted": has_voted,
    }


@register.simple_tag
def may_decide_unknown(approval) -> bool | None:
    """For a pushed card, whose viewers differ: None when only an approver may decide, so the card
    carries both the buttons and "Waiting for an approver" and the page shows the right one."""
    return None if approval.approver_required else True
