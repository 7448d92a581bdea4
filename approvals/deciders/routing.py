"""Who may see and decide a gated call in an organisation: routes, escalation and delegation.

A route sends an agent's calls of some tools, from some risk up, to the members of its approver
groups; `quorum` of them must approve. Once it escalates, members of its escalation groups may
decide too. A delegation lets a delegate act as the delegator for a time window. Everything here
reads stored rows: surfaces ask `approvals.permissions`, which asks this module.

Rules of eligibility (the issue's contract, in one place):
- an unrouted call: the owner decides their own calls unless the call needs an approver; then any
  global approver other than the requester and the editor (four eyes), as before routes;
- a routed call: members of the route's approver groups (or, once escalated, its escalation groups)
  approve and reject it; the requester and the editor never approve it; the owner may always
  reject it (a veto); a global approver outside those groups sees it but may not decide it;
- a delegate may do what an active delegation's delegator may, never on their own call; the
  decision (or vote) records `on_behalf_of`.
"""
import fnmatch
from datetime import timedelta
from dataclasses import dataclass, field
from functools import cached_property

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Q
from django.utils import timezone

from ..models import Approval, Delegation, Route
from ..policy.gate import RISKS

DECIDE_PERMISSION = "approvals.decide_approval"

# What the API token a program acts through was made for (chat.models.ApiToken.scope). A person in
# a browser acts with no token, with every power their account has.
DECIDING_SCOPE, ASKING_SCOPE = "decide", "ask"


ASKING_TOKEN = (
    "This API token was made to ask and read outcomes, never to decide (its scope is ask): "
    "a person decides, or a token made to decide."
)


def asks_only(user) -> bool:
    """Whether `user` acts here through a token made to ask (an MCP client, an outside agent, an
    A2A client): it may ask and read outcomes, and decides nothing, whatever its user may."""
    return getattr(user, "token_scope", DECIDING_SCOPE) == ASKING_SCOPE


def is_global_approver(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active and user.has_perm(DECIDE_PERMISSION))


# Routes ------------------------------------------------------------------------------------------


def live_routes(agent_id) -> list[Route]:
    """The agent's routes that route new calls (not removed), with their groups: read once a turn."""
    return list(Route.objects.filter(agent_id=agent_id, deleted_at__isnull=True).order_by("pk"))


def match(routes: list[Route], *, tool: str, risk: str) -> Route | None:
    """The most specific route for a call: a tool pattern beats `*` (a plain name beats a glob, a
    longer glob a shorter one), then a higher minimum risk beats a lower; the oldest route breaks a
    tie. None: no route applies, and the call is decided as before routes."""
    if risk not in RISKS:
        return None
    fitting = [
        route for route in routes
        if route.min_risk in RISKS
        and RISKS.index(risk) >= RISKS.index(route.min_risk)
        and fnmatch.fnmatchcase(tool, route.tool)
    ]
    return max(fitting, key=lambda route: (*specificity(route.tool), RISKS.index(route.min_risk), -route.pk), default=None)


def specificity(pattern: str) -> tuple[int, int]:
    """How narrowly a tool pattern picks: a plain name (no wildcard) first, then by how many
    characters are not wildcards (`payments__*` before `pay*`, both before `*`)."""
    wild = sum(pattern.count(char) for char in "*?[")
    return (0 if wild else 1, len(pattern) - wild)


# Who acts as whom ----------------------------------------------------------------------------------


@dataclass
class Powers:
    """What one person may do now: as themselves, and as each delegator whose delegation to them is
    active. Read lazily (a query for delegations, one for route memberships), once per request."""

    user: object
    now: object = field(default_factory=timezone.now)

    @cached_property
    def delegators(self) -> list:
        if not (self.user and self.user.is_authenticated and self.user.is_active):
            return []
        active = Delegation.objects.filter(
            delegate=self.user, ended_at__isnull=True, starts_at__lte=self.now, ends_at__gt=self.now,
            delegator__is_active=True,
        ).select_related("delegator").order_by("starts_at", "pk")
        return list(dict.fromkeys(delegation.delegator for delegation in active if delegation.delegator_id != self.user.pk))

    @property
    def principals(self) -> list:
        """Whom this person may act as: themselves first, then their delegators."""
        if not (self.user and self.user.is_authenticated and self.user.is_active):
            return []
        return [self.user, *self.delegators]

    @cached_property
    def _memberships(self) -> tuple[dict, dict]:
        """route id → the principals in its approver groups; and in its escalation groups."""
        principals = {principal.pk: principal for principal in self.principals}
        approve: dict[int, list] = {}
        escalate: dict[int, list] = {}
        if not principals:
            return approve, escalate
        users = get_user_model().groups.through
        member_of = users.objects.filter(user_id__in=principals).values_list("group_id", "user_id")
        groups: dict[int, list[int]] = {}
        for group_id, user_id in member_of:
            groups.setdefault(group_id, []).append(user_id)
        if not groups:
            return approve, escalate
        for through, into in ((Route.approvers.through, approve), (Route.escalate_to.through, escalate)):
            for route_id, group_id in through.objects.filter(group_id__in=groups).values_list("route_id", "group_id"):
                into.setdefault(route_id, []).extend(principals[user_id] for user_id in groups[group_id])
        return approve, escalate

    def route_principals(self, approval: Approval) -> list:
        """Whom this person may act as on a routed approval: members of its approver groups, and of
        its escalation groups once it escalated (each once, themselves first)."""
        approve, escalate = self._memberships
        found = list(approve.get(approval.route_id, []))
        if approval.escalated_at is not None:
            found += escalate.get(approval.route_id, [])
        order = {principal.pk: index for index, principal in enumerate(self.principals)}
        return sorted(dict.fromkeys(found), key=lambda principal: order[principal.pk])

    def deciding_routes(self) -> tuple[set[int], set[int]]:
        """The routes whose calls this person may decide (as themselves or a delegator): from the
        start, and once escalated. For a page whose cards are pushed to every viewer."""
        approve, escalate = self._memberships
        return set(approve), set(escalate)

    def sees_route(self, route_id) -> bool:
        approve, escalate = self._memberships
        return route_id in approve or route_id in escalate

    def visible_routes(self) -> set[int]:
        approve, escalate = self._memberships
        return set(approve) | set(escalate)

    def is_global(self) -> bool:
        return any(is_global_approver(principal) for principal in self.principals)

    def has_own_powers(self) -> bool:
        """Whether they may decide something as themselves (not only through a delegation): what a
        delegation hands over. Delegations are not passed on."""
        approve, escalate = self._memberships
        own = self.user.pk
        return is_global_approver(self.user) or any(
            principal.pk == own for principals in (*approve.values(), *escalate.values()) for principal in principals
        )

    def may_decide_anything(self) -> bool:
        """An approver of some kind: global, a route group member, or a delegate of one (the inbox
        and the delegation API are theirs)."""
        return self.is_global() or bool(self.visible_routes())


def powers_of(user, powers: Powers | None = None) -> Powers:
    return powers if powers is not None and powers.user is user else Powers(user)


def can_see(user, approval: Approval, powers: Powers | None = None) -> bool:
    if not (user and user.is_authenticated):
        return False
    if approval.requested_by_id == user.pk or is_global_approver(user):
        return True
    powers = powers_of(user, powers)
    if approval.route_id is not None and powers.sees_route(approval.route_id):
        return True
    return any(is_global_approver(principal) for principal in powers.delegators)


def acting_as(user, approval: Approval, *, approve: bool = True, powers: Powers | None = None):
    """Whom `user` would decide `approval` as: themselves, a delegator (the decision is then on
    their behalf), or None when they may not decide it this way. Refuses what four eyes and routes
    refuse whoever asks: approving one's own call (directly or through a delegation), approving an
    edit one wrote, deciding a routed call outside its groups (the owner may still reject it), and
    any decision through a token made only to ask."""
    if asks_only(user) or not can_see(user, approval, powers):
        return None
    requester, editor = approval.requested_by_id, approval.edited_by_id
    if not approve and user.pk == requester:
        return user  # the owner's veto: saying no needs no second pair of eyes
    if approve and user.pk in (requester, editor) and (approval.route_id is not None or approval.approver_required):
        return None  # four eyes: not one's own call, nor an edit one wrote (nor through a delegation)
    if approval.route_id is not None:
        for principal in powers_of(user, powers).route_principals(approval):
            if principal.pk == requester or (approve and principal.pk == editor):
                continue  # the requester never counts; whoever wrote an edit does not also check it
            return principal
        return None
    if approval.approver_required and approve:
        for principal in powers_of(user, powers).principals:
            if is_global_approver(principal) and principal.pk not in (requester, editor):
                return principal
        return None
    # An unrouted call that needs no approver (or a rejection): its owner decides it, as does any
    # global approver, or their delegate, who sees it.
    if user.pk == requester or is_global_approver(user):
        return user
    return next((principal for principal in powers_of(user, powers).delegators if is_global_approver(principal)), None)


def visible_filter(user, powers: Powers | None = None) -> Q:
    """The approvals `user` may see, as a filter: everything for a global approver (or a delegate of
    one), else their own and those routed to a group they (or a delegator) belong to."""
    if not (user and user.is_authenticated):
        return Q(pk__in=[])
    if is_global_approver(user):
        return Q()
    powers = powers_of(user, powers)
    if any(is_global_approver(principal) for principal in powers.delegators):
        return Q()
    routes = powers.visible_routes()
    return Q(requested_by=user) | Q(route_id__in=routes) if routes else Q(requested_by=user)


# Reminders and escalation ----------------------------------------------------------------------------


def deadlines(route: Route | None, now) -> dict:
    """When a routed approval is reminded and escalated, from its request."""
    if route is None:
        return {}
    fields = {}
    if route.remind_after_seconds:
        fields["remind_at"] = now + timedelta(seconds=route.remind_after_seconds)
    if route.escalate_after_seconds and route.escalate_to.exists():
        fields["escalate_at"] = now + timedelta(seconds=route.escalate_after_seconds)
    return fields


def eligible_users(approval: Approval) -> list:
    """Everyone who may approve a routed approval now (not through a delegation), for reminders."""
    if approval.route_id is None:
        return []
    groups = Q(groups__approval_routes=approval.route_id)
    if approval.escalated_at is not None:
        groups |= Q(groups__escalation_routes=approval.route_id)
    users = get_user_model().objects.filter(groups, is_active=True).exclude(pk=approval.requested_by_id)
    return list(users.distinct().order_by("pk"))


def deciders(approval: Approval) -> list:
    """Whom a surface that reaches people (Telegram, Slack, email, a phone) asks about a pending
    approval: for a routed call the members of its route's groups (and of its escalation groups once
    escalated) but the requester; else its owner, or for a call that needs an approver every active
    global approver but the requester and whoever edited it. Not delegates: they act in the app."""
    if approval.route_id is not None:
        return [user for user in eligible_users(approval) if user.pk != approval.edited_by_id]
    users = get_user_model().objects.filter(is_active=True)
    if not approval.approver_required:
        return list(users.filter(pk=approval.requested_by_id))
    app_label, codename = DECIDE_PERMISSION.split(".")
    granted = Permission.objects.filter(content_type__app_label=app_label, codename=codename).values("pk")
    approvers = users.filter(Q(is_superuser=True) | Q(user_permissions__in=granted) | Q(groups__permissions__in=granted))
    approvers = approvers.exclude(pk__in=[approval.requested_by_id, approval.edited_by_id or 0])
    return list(approvers.distinct().order_by("pk"))
