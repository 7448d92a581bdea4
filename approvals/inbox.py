"""The approvers' inbox: the dashboard's pending approvals for one approver, with the user's request
that led to each call, alike calls gathered into groups, and the approver's snoozes."""
import json
from dataclasses import dataclass, field
from datetime import timedelta

from django.apps import apps
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from .deciders import routing, votes
from .models import Approval, Snooze
from .permissions import can_decide
from .selectors import Filters, pending_approvals, with_routes
from .templatetags.approval_tags import shown_arguments, target

SNOOZE_FOR = timedelta(hours=1)


@dataclass
class InboxItem:
    """One line of the inbox: a single approval, or a group of alike calls decided together."""

    approvals: list[Approval] = field(default_factory=list)

    @property
    def is_group(self) -> bool:
        return len(self.approvals) > 1

    @property
    def first(self) -> Approval:
        return self.approvals[0]

    @property
    def requesters(self) -> list[str]:
        return list(dict.fromkeys(approval.requested_by.get_username() for approval in self.approvals))

    @property
    def other_targets(self) -> list[str]:
        """What the others act on, after the first's title ("Delete notes/a.txt, notes/b.txt"), each once."""
        first = target(self.first)
        return [where for where in dict.fromkeys(target(approval) for approval in self.approvals[1:]) if where != first]

    @property
    def soonest_expiry(self):
        """When the first of its calls expires (None when none does)."""
        return min((approval.expires_at for approval in self.approvals if approval.expires_at), default=None)

    @property
    def shown(self) -> list[str]:
        """What the group's decision posts: each id with the version listed."""
        return [f"{approval.pk}:{approval.shown_hash}" for approval in self.approvals]


def inbox_approvals(user, filters: Filters, powers: routing.Powers | None = None) -> QuerySet[Approval]:
    """The pending approvals `user` sees in their inbox: the filtered dashboard list of what they may
    see, without the ones they snoozed (or only those, with `filters.snoozed`), each with `request_text`."""
    approvals = pending_approvals(filters, user=user, powers=powers)
    snoozed = Snooze.objects.filter(user=user, until__gt=timezone.now()).values("approval_id")
    if filters.snoozed:
        until = Snooze.objects.filter(user=user, approval_id=OuterRef("pk")).values("until")[:1]
        approvals = approvals.filter(pk__in=snoozed).annotate(snoozed_until=Subquery(until))
    else:
        approvals = approvals.exclude(pk__in=snoozed)
    return with_request_text(approvals)


def with_request_text(approvals: QuerySet[Approval]) -> QuerySet[Approval]:
    """Each approval's `request_text`: the last message the user wrote before the call, in the same
    query (a subquery, not one query per row)."""
    message = apps.get_model("chat", "Message")  # named, not imported: approvals imports nothing of chat
    requests = message.objects.filter(
        conversation_id=OuterRef("conversation_id"),
        role=message.Role.USER,
        position__lt=OuterRef("tool_call__message__position"),
    ).order_by("-position")
    return approvals.annotate(request_text=Subquery(requests.values("content")[:1]))


def pending_count(user, powers: routing.Powers | None = None) -> int:
    """How many approvals wait in `user`'s inbox (what they may see, snoozed ones left out): one query."""
    snoozed = Snooze.objects.filter(user=user, until__gt=timezone.now()).values("approval_id")
    visible = routing.visible_filter(user, powers)
    return Approval.objects.filter(visible, status=Approval.Status.PENDING).exclude(pk__in=snoozed).count()


def snoozed_count(user) -> int:
    return Snooze.objects.filter(user=user, until__gt=timezone.now(), approval__status=Approval.Status.PENDING).count()


def snooze(user, approval_ids: list[int], *, until=None) -> int:
    """Hide the pending approvals among `approval_ids` from `user`'s inbox until `until` (an hour from
    now by default). Returns how many were snoozed."""
    until = until or timezone.now() + SNOOZE_FOR
    pending = list(Approval.objects.filter(pk__in=approval_ids, status=Approval.Status.PENDING).values_list("pk", flat=True))
    for approval_id in pending:
        Snooze.objects.update_or_create(approval_id=approval_id, user=user, defaults={"until": until})
    return len(pending)


def wake(user, approval_ids: list[int]) -> None:
    """Back into `user`'s inbox now."""
    Snooze.objects.filter(user=user, approval_id__in=approval_ids).delete()


def alike_key(approval: Approval) -> tuple | None:
    """What alike calls share: the same agent, tool and risk, and arguments of the same names (a
    group's row says one risk, so a riskier alike call is never hidden under it). None for what is
    never grouped: questions, plans, critical calls (each needs its typed confirmation), calls that
    need several approvals (each shows its own votes) and arguments that are not named fields."""
    arguments = shown_arguments(approval)
    if approval.kind != Approval.Kind.ACTION or approval.confirmation_required or approval.quorum > 1 or not isinstance(arguments, dict):
        return None
    return (approval.conversation.agent_id, approval.tool_call.name, approval.risk, tuple(sorted(arguments)))


def differing_fields(one: dict, other: dict) -> set[str]:
    """The names of the arguments (both have the same names) whose values differ."""
    return {name for name in one if json.dumps(one[name], sort_keys=True, default=str) != json.dumps(other[name], sort_keys=True, default=str)}


@dataclass
class _Forming:
    """A group being gathered: its item, and the one argument its calls may differ in (None while
    every call is the same as the first)."""

    item: InboxItem
    varying: str | None = None

    def takes(self, approval: Approval) -> bool:
        differing = differing_fields(shown_arguments(self.item.first), shown_arguments(approval))
        if len(differing) > 1 or (self.varying and differing - {self.varying}):
            return False
        if differing:
            self.varying = differing.pop()
        return True


def inbox_items(user, approvals: list[Approval], powers: routing.Powers | None = None) -> list[InboxItem]:
    """The inbox's lines, in the order of `approvals`: alike calls `user` may decide (alike_key, the
    arguments differing in at most one field, the same one for the whole group) gathered into one
    group at the place of the first; everything else one line each. Sets on each approval what the
    viewer may do: `viewer_may_decide` (approve), `viewer_may_reject`, `viewer_voted` (their vote
    is counted)."""
    powers = routing.powers_of(user, powers)  # one read of their delegations and groups for every row
    items: list[InboxItem] = []
    forming: dict[tuple, list[_Forming]] = {}
    for approval in with_routes(approvals):
        approval.viewer_voted = voted(user, approval)
        approval.viewer_may_decide = not approval.viewer_voted and can_decide(user, approval, powers=powers)
        approval.viewer_may_reject = can_decide(user, approval, approve=False, powers=powers)
        key = alike_key(approval) if approval.viewer_may_decide else None
        if key is None:
            items.append(InboxItem([approval]))
            continue
        group = next((group for group in forming.setdefault(key, []) if group.takes(approval)), None)
        if group is not None:
            group.item.approvals.append(approval)
        else:
            forming[key].append(_Forming(InboxItem([approval])))
            items.append(forming[key][-1].item)
    return items


def voted(user, approval: Approval) -> bool:
    """Whether `user`'s approve counts toward `approval`'s quorum already (theirs, or cast by them for
    someone): they may not vote again, and the card says so."""
    return approval.quorum > 1 and any(vote.user_id == user.pk or vote.voter_id == user.pk for vote in votes.counted(approval))
