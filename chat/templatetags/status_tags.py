"""What the conversation's status bar tells the owner they can do while calls wait."""
from django import template
from django.db.models import Count, Q

from approvals.models import Approval

register = template.Library()


@register.simple_tag
def waiting_counts(conversation) -> dict:
    """How many decisions wait in `conversation`, and how many of them only an approver other than
    its owner may approve (four eyes): the owner may only reject those, so the bar must not tell
    them to type "approve all N"."""
    return Approval.objects.filter(conversation_id=conversation.pk, status=Approval.Status.PENDING).aggregate(
        pending=Count("pk"),
        four_eyes=Count("pk", filter=Q(approver_required=True)),
        questions=Count("pk", filter=Q(kind=Approval.Kind.QUESTION)),
        pauses=Count("pk", filter=~Q(kind=Approval.Kind.ACTION)),  # questions and plans: "yes" decides none
    )
