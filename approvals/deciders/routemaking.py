"""Making and removing routes (approvals.deciders.routing uses them): checked here for the API, the admin
and the demo alike."""
import logging

from django.apps import apps
from django.contrib.auth.models import Group
from django.utils import timezone

from core.inputs import is_storable

from ..policy import versions as policy_versions
from ..models import Risk, Route

logger = logging.getLogger(__name__)
MAX_QUORUM = 20
MAX_DELAY_SECONDS = 366 * 24 * 3600


class InvalidRoute(ValueError):
    """A route that names an unknown agent or group, or holds impossible values: nothing is saved."""


def create_route(
    *, created_by, agent: str, tool: str = "*", min_risk: str = Risk.LOW, approvers: list[str], quorum: int = 1,
    remind_after_seconds: int | None = None, escalate_after_seconds: int | None = None, escalate_to: list[str] = (),
) -> Route:
    agent_row, approver_groups, escalation_groups = check_route(
        agent=agent, tool=tool, min_risk=min_risk, approvers=approvers, quorum=quorum,
        remind_after_seconds=remind_after_seconds, escalate_after_seconds=escalate_after_seconds, escalate_to=escalate_to,
    )
    with policy_versions.recording(user=created_by):  # the route and its groups: one policy version
        route = Route.objects.create(
            agent=agent_row, tool=tool, min_risk=min_risk, quorum=quorum, remind_after_seconds=remind_after_seconds,
            escalate_after_seconds=escalate_after_seconds, created_by=created_by,
        )
        route.approvers.set(approver_groups)
        route.escalate_to.set(escalation_groups)
    logger.info("route %s made by %s: %s %s from %s, quorum %s", route.pk, created_by, agent, tool, min_risk, quorum)
    return route


def check_route(
    *, agent: str, tool: str, min_risk: str, approvers: list[str], quorum: int,
    remind_after_seconds: int | None, escalate_after_seconds: int | None, escalate_to: list[str],
) -> tuple:
    """(the agent, the approver groups, the escalation groups) of a route that may be made; raises
    InvalidRoute naming what is wrong (the admin's form checks with it too)."""
    agent_model = apps.get_model("chat", "Agent")  # named, not imported: approvals imports nothing of chat
    if not is_storable(agent) or not (agent_row := agent_model.objects.filter(slug=agent).first()):
        raise InvalidRoute(f"Unknown agent {agent!r}.")
    if not tool or len(tool) > 200 or not is_storable(tool):
        raise InvalidRoute("`tool` is a tool name or a glob such as payments__* (1 to 200 characters).")
    if min_risk not in Risk.values:
        raise InvalidRoute(f"`min_risk` is one of {', '.join(Risk.values)}.")
    if not approvers:
        raise InvalidRoute("Name at least one approver group.")
    if not 1 <= quorum <= MAX_QUORUM:
        raise InvalidRoute(f"`quorum` is from 1 to {MAX_QUORUM}.")
    for name, delay in (("remind_after_seconds", remind_after_seconds), ("escalate_after_seconds", escalate_after_seconds)):
        if delay is not None and not 1 <= delay <= MAX_DELAY_SECONDS:
            raise InvalidRoute(f"`{name}` is from 1 to {MAX_DELAY_SECONDS} seconds, or null.")
    if escalate_after_seconds is not None and not escalate_to:
        raise InvalidRoute("`escalate_after_seconds` needs `escalate_to` groups to escalate to.")
    return agent_row, _groups(approvers), _groups(escalate_to)


def _groups(names: list[str]) -> list[Group]:
    names = list(dict.fromkeys(names))
    if not all(isinstance(name, str) and is_storable(name) for name in names):
        raise InvalidRoute("Group names are text.")
    found = {group.name: group for group in Group.objects.filter(name__in=names)}
    if missing := [name for name in names if name not in found]:
        raise InvalidRoute(f"Unknown group {missing[0]!r}.")
    return [found[name] for name in names]


def remove_route(route: Route) -> None:
    """It routes nothing new; what it routed keeps it (and its groups still decide those)."""
    if route.deleted_at is None:  # saved, not updated: its history and a policy version (approvals.policy.versions)
        route.deleted_at = timezone.now()
        route.save(update_fields=["deleted_at"])
