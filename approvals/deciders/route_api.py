"""Routes in the JSON API: who approves which calls (for holders of the route permission)."""
from datetime import datetime
from typing import Annotated, Literal

from django.http import Http404
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from . import routemaking
from ..policy.versions import route_entry
from ..models import Route
from ..permissions import may_manage_routes

router = Router(tags=["routes"])
RouteId = Annotated[int, Field(ge=1, le=2**63 - 1)]
Delay = Annotated[int, Field(ge=1, le=routemaking.MAX_DELAY_SECONDS)]


class RouteIn(Schema):
    agent: str = Field(description="The agent's slug.")
    tool: str = Field("*", description="A tool's name, or a glob such as payments__*; the most specific route wins.")
    min_risk: Literal["low", "medium", "high", "critical"] = Field("low", description="The route applies from this risk up.")
    approvers: list[str] = Field(description="Names of the groups whose members approve (at least one).")
    quorum: int = Field(1, ge=1, le=routemaking.MAX_QUORUM, description="How many distinct members must approve.")
    remind_after_seconds: Delay | None = Field(None, description="Remind the approvers once, after this long undecided.")
    escalate_after_seconds: Delay | None = Field(None, description="After this long undecided, `escalate_to` may decide too.")
    escalate_to: list[str] = Field([], description="Names of the groups that may decide once it escalated.")


class RouteOut(Schema):
    id: int
    agent: str
    tool: str
    min_risk: str
    approvers: list[str]
    quorum: int
    remind_after_seconds: int | None
    escalate_after_seconds: int | None
    escalate_to: list[str]
    created_by: str | None
    created_at: datetime


class RouteList(Schema):
    items: list[RouteOut]
    count: int


def route_out(route: Route) -> dict:
    """A route as the API shows it: what the policy export writes of it (policy_versions.route_entry),
    with its id and who made it when."""
    return {"id": route.pk, **route_entry(route), "created_by": route.created_by.get_username() if route.created_by else None, "created_at": route.created_at}


def _manager(request):
    if not may_manage_routes(request.auth):
        raise HttpError(403, "Routes are for operators with the route permission.")
    return request.auth


@router.get("", response=RouteList)
def list_routes(request):
    """The routes in force (removed ones are not listed), by agent and tool."""
    _manager(request)
    routes = list(
        Route.objects.filter(deleted_at__isnull=True).select_related("agent", "created_by")
        .prefetch_related("approvers", "escalate_to")[:1000]
    )
    return {"items": [route_out(route) for route in routes], "count": len(routes)}


@router.post("", response={201: RouteOut})
def create_route(request, payload: RouteIn):
    """Make a route. 400 naming an unknown agent or group; 403 without the route permission."""
    user = _manager(request)
    try:
        route = routemaking.create_route(created_by=user, **payload.dict())
    except routemaking.InvalidRoute as exc:
        raise HttpError(400, str(exc)) from None
    return Status(201, route_out(route))


@router.delete("/{route_id}", response={204: None})
def delete_route(request, route_id: RouteId):
    """Remove a route: it routes nothing new; the calls it routed keep it (and their approvers)."""
    _manager(request)
    route = Route.objects.filter(pk=route_id, deleted_at__isnull=True).first()
    if route is None:
        raise Http404("No such route.")
    routemaking.remove_route(route)
    return Status(204, None)
