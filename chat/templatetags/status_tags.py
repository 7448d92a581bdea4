"""What the conversation's status bar tells the owner they can do while calls wait."""
from django import template
from django.db.models import Count, Q

from approvals.models import Approval, Risk
from approvals.templatetags.approval_tags import route_need

register = template.Library()


@register.simple_tag
def waiting_counts(conversation) -> dict:
    """How many decisions wait in `conversation`, and of them: how many only an approver other than
    its owner may approve (four eyes: the owner may only reject those, so the bar must not tell them
    to type "approve all N"), how many are critical (only their card's typed confirmation approves
    them, never a typed "yes"), and how many are routed to groups (`need`: who must approve them,
    "2 approvals from finance", when every waiting call is routed so)."""
    pending = Approval.objects.filter(conversation_id=conversation.pk, status=Approval.Status.PENDING)
    counts = pending.aggregate(
        pending=Count("pk"),
        four_eyes=Count("pk", filter=Q(approver_required=True, route__isnull=True)),
        questions=Count("pk", filter=Q(kind=Approval.Kind.QUESTION)),
        files=Count("pk", filter=Q(kind=Approval.Kind.QUESTION, question__type="file")),  # answered by an upload only
        pauses=Count("pk", filter=~Q(kind=Approval.Kind.ACTION)),  # questions and plans: "yes" decides none
        critical=Count("pk", filter=Q(risk=Risk.CRITICAL, kind=Approval.Kind.ACTION)),
        routed=Count("pk", filter=Q(route__isnull=False)),
    )
    counts["need"] = ""
    if counts["routed"] and counts["routed"] == counts["pending"]:
        needs = {route_need(approval) for approval in pending.filter(route__isnull=False).prefetch_related("route__approvers", "route__escalate_to")}
        if len(needs) == 1:
            counts["need"] = needs.pop().removeprefix("Needs ")
    return counts
