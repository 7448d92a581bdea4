"""Shared reads: which conversations a user may see, and which ones the sweeper should move."""
from datetime import timedelta

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from approvals.models import Approval
from approvals.permissions import is_approver

from .models import Conversation, Message


def visible_conversations(user) -> QuerySet[Conversation]:
    conversations = Conversation.objects.select_related("agent", "owner")
    if is_approver(user):
        return conversations
    return conversations.filter(owner=user)


def recent_conversations(user, *, limit: int = 100) -> QuerySet[Conversation]:
    """The user's own newest conversations, each with `pending_count`. The index on (owner,
    -created_at) gives the first rows without a sort, and the count runs only for those rows, on
    the (conversation, status) index, never over all of the owner's history."""
    pending = (
        Approval.objects.filter(conversation=OuterRef("pk"), status=Approval.Status.PENDING)
        .values("conversation")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return (
        Conversation.objects.select_related("agent")
        .filter(owner=user)
        .annotate(pending_count=Coalesce(Subquery(pending), 0))
        .order_by("-created_at")[:limit]
    )


def conversation_for(user, conversation_id) -> Conversation:
    """The conversation if `user` owns it or is an approver; 404 otherwise (its existence is not told)."""
    conversation = visible_conversations(user).filter(pk=conversation_id).first()
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def messages_for_page(conversation: Conversation) -> QuerySet[Message]:
    """Everything a page shows of a conversation, in a constant number of queries."""
    return conversation.messages.prefetch_related(
        "tool_calls__approval__decided_by", "tool_calls__approval__requested_by"
    )


def stalled_conversations(*, stalled_for: timedelta) -> QuerySet[Conversation]:
    """Running with nobody advancing it for a while, or waiting although nothing is pending."""
    now = timezone.now()
    pending = Approval.objects.filter(conversation=OuterRef("pk"), status=Approval.Status.PENDING)
    return Conversation.objects.filter(
        Q(status=Conversation.Status.RUNNING, updated_at__lt=now - stalled_for)
        & (Q(advancing_token="") | Q(advancing_until__lt=now))
        | Q(status=Conversation.Status.WAITING_FOR_APPROVAL, updated_at__lt=now - stalled_for) & ~Exists(pending)
    )
