"""Shared reads: which conversations a user may see, a page of their messages, and which ones the
sweeper should move."""
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery, prefetch_related_objects
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from approvals.deciders import routing
from approvals.models import Approval
from approvals.selectors import with_routes
from core.inputs import is_storable

from .models import Agent, Conversation, Message


def visible_conversations(user, powers: routing.Powers | None = None) -> QuerySet[Conversation]:
    """The user's own conversations and those holding a call they may see: every one for a global
    approver (or their delegate), those of calls routed to their groups for a route's member."""
    conversations = Conversation.objects.select_related("agent", "owner")
    visible = routing.visible_filter(user, powers)
    if visible == Q():
        return conversations
    return conversations.filter(Q(owner=user) | Q(pk__in=Approval.objects.filter(visible).values("conversation_id")))


def usable_agents(user) -> QuerySet[Agent]:
    """The agents `user` may start or continue a conversation with: open ones, and those granted to
    them or to one of their groups (a superuser, every one). Any other agent is unknown to them."""
    agents = Agent.objects.all()
    if not (user and user.is_authenticated and user.is_active):
        return agents.none()
    if user.is_superuser:
        return agents
    granted = Q(open_to_everyone=True) | Q(allowed_users=user) | Q(allowed_groups__in=user.groups.all())
    return agents.filter(pk__in=Agent.objects.filter(granted).values("pk"))


def may_use(user, agent: Agent) -> bool:
    """Whether `user` may use `agent`, by the same rule as `usable_agents`, judged on the agent's row
    as read for this request: no query for an open agent (most starts and posts), one otherwise."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    if user.is_superuser or agent.open_to_everyone:
        return True
    granted = Q(allowed_users=user) | Q(allowed_groups__in=user.groups.all())
    return Agent.objects.filter(granted, pk=agent.pk).exists()


def agent_for(user, slug: str) -> Agent | None:
    if not is_storable(slug):  # no slug holds a NUL, and PostgreSQL refuses one even in a query
        return None
    try:
        agent = Agent.objects.get(slug=slug)  # unique: no ORDER BY to build, as first() would
    except Agent.DoesNotExist:
        return None
    return agent if may_use(user, agent) else None


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


def conversation_for(user, conversation_id, powers: routing.Powers | None = None) -> Conversation:
    """The conversation if `user` owns it, is a global approver (or their delegate), or may see one of
    its calls (routed to their group); 404 otherwise (its existence is not told). Its owner needs no
    look at their permissions (two queries); anyone else always gets the look, found or not, so the
    time taken does not tell either."""
    conversation = Conversation.objects.select_related("agent", "owner").filter(pk=conversation_id).first()
    if conversation is not None and user and user.is_authenticated and conversation.owner_id == user.pk:
        return conversation
    visible = routing.visible_filter(user, powers)
    if visible != Q() and not Approval.objects.filter(visible, conversation_id=conversation_id).exists():
        raise Http404("No such conversation.")
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


MESSAGES_PER_PAGE = 50
MAX_POSITION = 2**31 - 1  # Message.position is a PositiveIntegerField: 32 bits on PostgreSQL


@dataclass(frozen=True)
class MessagePage:
    """Some of a conversation's messages, oldest first, and whether it has earlier ones."""

    messages: list[Message]
    has_earlier: bool

    @property
    def earliest_position(self) -> int | None:
        """What `before` asks for next: the page just before this one."""
        return self.messages[0].position if self.messages else None


def messages_for_page(conversation: Conversation, *, limit: int = MESSAGES_PER_PAGE, before: int | None = None) -> MessagePage:
    """The newest `limit` messages (of those before position `before`), with everything a page or the
    API shows of them, in a constant number of queries whatever the conversation's length. The
    (conversation, position) unique index gives them newest first without a sort; one row more than
    shown says whether there are earlier ones, without a count over the whole conversation."""
    newest = conversation.messages.order_by("-position")
    if before is not None:
        newest = newest.filter(position__lt=before)
    rows = list(newest[: limit + 1])
    messages = rows[:limit][::-1]
    prefetch_related_objects(
        messages, "tool_calls__approval__decided_by", "tool_calls__approval__requested_by", "tool_calls__approval__edited_by",
        "tool_calls__approval__rule", "tool_calls__approval__repeat_of__decided_by",
    )
    approvals = [call.approval for message in messages for call in message.tool_calls.all() if getattr(call, "approval", None)]
    prefetch_related_objects([approval for approval in approvals if approval.on_behalf_of_id], "on_behalf_of")
    with_routes(approvals)  # routed cards: their groups and votes (no query when none is routed)
    undoable = [call for message in messages for call in message.tool_calls.all() if call.undo_until is not None]
    prefetch_related_objects(undoable, "undos")  # their Undo lines (chat.undo): one query, none when there are none
    return MessagePage(messages, has_earlier=len(rows) > limit)


def stalled_conversations(*, stalled_for: timedelta) -> QuerySet[Conversation]:
    """Running with nobody advancing it for a while, or waiting although nothing is pending."""
    now = timezone.now()
    pending = Approval.objects.filter(conversation=OuterRef("pk"), status=Approval.Status.PENDING)
    return Conversation.objects.filter(
        Q(status=Conversation.Status.RUNNING, updated_at__lt=now - stalled_for)
        & (Q(advancing_token="") | Q(advancing_until__lt=now))
        | Q(status=Conversation.Status.WAITING_FOR_APPROVAL, updated_at__lt=now - stalled_for) & ~Exists(pending)
    )
