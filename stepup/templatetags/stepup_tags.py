from django import template

from approvals import services
from approvals.models import Approval, Risk

register = template.Library()


@register.filter
def needs_step_up(approval: Approval) -> bool:
    """Whether the card's Approve runs the passkey ceremony. Only a high or critical call can need
    one, so the others cost no query (the agent is read only for those)."""
    if approval.risk not in (Risk.HIGH, Risk.CRITICAL) or approval.kind == Approval.Kind.QUESTION:
        return False
    return services.needs_step_up(approval)
