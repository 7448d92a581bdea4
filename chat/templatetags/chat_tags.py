from django import template

from approvals.permissions import can_decide

register = template.Library()


@register.simple_tag(takes_context=True)
def may_decide(context, approval) -> bool:
    """Whether the viewer of this page may decide `approval` (the decision service checks again)."""
    return can_decide(context["request"].user, approval)


@register.simple_tag
def may_decide_unknown(approval) -> bool | None:
    """For a pushed card, whose viewers differ: None when only an approver may decide, so the card
    carries both the buttons and "Waiting for an approver" and the page shows the right one."""
    return None if approval.approver_required else True
