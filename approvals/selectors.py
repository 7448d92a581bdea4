"""The dashboard's reads: pending approvals with filters, and the history of decisions, each limited
to what the viewer may see (approvals.deciders.routing.visible_filter)."""
import re
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Case, F, IntegerField, Q, QuerySet, TextField, Value, When, prefetch_related_objects
from django.db.models.functions import Cast
from django.utils import timezone

from core.inputs import storable

from .deciders import routing
from .models import Approval, Risk

OLDER_THAN = re.compile(r"[0-9]{1,6}")  # minutes, ASCII digits: up to about two years back
ROW_RELATIONS = ("tool_call", "conversation__agent", "requested_by", "decided_by", "edited_by", "claimed_by", "on_behalf_of")


@dataclass(frozen=True)
class Filters:
    agent: str = ""
    tool: str = ""
    risk: str = ""
    requester: str = ""
    older_than_minutes: int | None = None
    q: str = ""
    kind: str = ""  # action, question or plan
    snoozed: bool = False  # the inbox: the viewer's snoozed approvals instead of the others
    order: str = ""  # "" urgency (the default), "age": oldest first

    @property
    def any_set(self) -> bool:
        """Whether the list is narrowed by a folded filter (the search stays in sight): they open then."""
        return any((self.agent, self.tool, self.risk, self.requester, self.older_than_minutes is not None, self.kind))

    @classmethod
    def from_query(cls, query) -> "Filters":
        older = query.get("older_than", "")

        def text(name: str, limit: int) -> str:  # no NUL (PostgreSQL refuses it in a query) nor lone surrogate
            return storable(query.get(name, "")).strip()[:limit]

        return cls(
            agent=text("agent", 50),
            tool=text("tool", 200),
            risk=query.get("risk", "") if query.get("risk", "") in Risk.values else "",
            requester=text("requester", 150),
            older_than_minutes=int(older) if OLDER_THAN.fullmatch(older) else None,
            q=text("q", 200),
            kind=query.get("kind", "") if query.get("kind", "") in Approval.Kind.values else "",
            snoozed=query.get("snoozed", "") == "1",
            order="age" if query.get("order", "") == "age" else "",
        )


# Urgency: a critical call first, then the one that expires soonest (one that never expires after
# every one that does), then the oldest.
URGENCY = (
    Case(When(risk=Risk.CRITICAL, then=Value(0)), default=Value(1), output_field=IntegerField()),
    F("expires_at").asc(nulls_last=True),
    "requested_at",
    "pk",
)


def pending_approvals(filters: Filters, *, user, powers: routing.Powers | None = None) -> QuerySet[Approval]:
    """The pending approvals `user` may see (a global approver: all), filtered, most urgent first
    (URGENCY) or with `filters.order` "age" oldest first; rows need no more queries (with_routes()
    for what routed rows show)."""
    approvals = Approval.objects.filter(routing.visible_filter(user, powers), status=Approval.Status.PENDING)
    order = ("requested_at", "pk") if filters.order == "age" else URGENCY
    return _filter(approvals.select_related(*ROW_RELATIONS), filters).order_by(*order)


def decided_approvals(filters: Filters, *, user, powers: routing.Powers | None = None) -> QuerySet[Approval]:
    approvals = Approval.objects.filter(routing.visible_filter(user, powers)).exclude(status=Approval.Status.PENDING)
    return _filter(approvals.select_related(*ROW_RELATIONS), filters).order_by("-decided_at", "-pk")


def with_routes(approvals: list[Approval]) -> list[Approval]:
    """What routed rows and cards show, read for all of them at once: the route's groups (who must
    decide) and the votes counted so far. A few queries whatever the number of rows, none when no
    approval is routed or needs several approvals."""
    prefetch_related_objects([a for a in approvals if a.route_id is not None], "route__approvers", "route__escalate_to")
    prefetch_related_objects([a for a in approvals if a.quorum > 1], "votes__user", "votes__on_behalf_of")
    return approvals


def _filter(approvals: QuerySet[Approval], filters: Filters) -> QuerySet[Approval]:
    if filters.agent:
        approvals = approvals.filter(conversation__agent__slug=filters.agent)
    if filters.tool:
        approvals = approvals.filter(tool_call__name=filters.tool)
    if filters.risk:
        approvals = approvals.filter(risk=filters.risk)
    if filters.kind:
        approvals = approvals.filter(kind=filters.kind)
    if filters.requester:
        approvals = approvals.filter(requested_by__username=filters.requester)
    if filters.older_than_minutes is not None:
        approvals = approvals.filter(requested_at__lte=timezone.now() - timedelta(minutes=filters.older_than_minutes))
    if filters.q:
        approvals = approvals.annotate(arguments_text=Cast("tool_call__arguments", TextField())).filter(
            Q(tool_call__name__icontains=filters.q)
            | Q(reason__icontains=filters.q)
            | Q(arguments_text__icontains=filters.q)
            | Q(rejection_reason__icontains=filters.q)
        )
    return approvals


def powers_for(request) -> routing.Powers:
    """The viewer's Powers, read once a request (their delegations and route groups), shared by the
    view, the nav and every card's `can_decide`."""
    powers = getattr(request, "_approval_powers", None)
    if powers is None or powers.user is not request.user:
        powers = request._approval_powers = routing.Powers(request.user)
    return powers
