"""Delegations in the JSON API: hand your approvals to a colleague for a while, list, end early."""
from datetime import datetime
from typing import Annotated

from django.http import Http404
from django.utils import timezone
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from . import delegations
from ..models import Delegation

router = Router(tags=["delegations"])
DelegationId = Annotated[int, Field(ge=1, le=2**63 - 1)]


class DelegationIn(Schema):
    to: str = Field(description="The delegate's username.")
    starts_at: datetime = Field(description="May be in the past.")
    ends_at: datetime = Field(description="After `starts_at`, and in the future.")


class DelegationOut(Schema):
    id: int
    delegator: str
    to: str
    starts_at: datetime
    ends_at: datetime
    ended_at: datetime | None = Field(description="When it was ended early; null: it runs to `ends_at`.")
    active: bool


class DelegationList(Schema):
    items: list[DelegationOut]
    count: int


def delegation_out(delegation: Delegation) -> dict:
    return {
        "id": delegation.pk,
        "delegator": delegation.delegator.get_username(),
        "to": delegation.delegate.get_username(),
        "starts_at": delegation.starts_at,
        "ends_at": delegation.ends_at,
        "ended_at": delegation.ended_at,
        "active": delegation.is_active(),
    }


@router.get("", response=DelegationList)
def list_delegations(request):
    """The delegations you gave or received, newest window first."""
    found = list(delegations.visible(request.auth)[:500])
    return {"items": [delegation_out(d) for d in found], "count": len(found)}


@router.post("", response={201: DelegationOut})
def create_delegation(request, payload: DelegationIn):
    """Let `to` decide what you may, from `starts_at` to `ends_at`. 400: to yourself, an unknown
    user, or a window that is over; 403: you may decide nothing to hand over."""
    if timezone.is_naive(payload.starts_at) or timezone.is_naive(payload.ends_at):
        raise HttpError(400, "`starts_at` and `ends_at` need a time zone (e.g. 2026-11-25T09:00:00Z).")
    try:
        delegation = delegations.delegate(request.auth, to=payload.to, starts_at=payload.starts_at, ends_at=payload.ends_at)
    except delegations.NotAnApprover as exc:
        raise HttpError(403, str(exc)) from None
    except delegations.InvalidDelegation as exc:
        raise HttpError(400, str(exc)) from None
    except OverflowError:
        raise HttpError(400, "The window is outside the range of dates this API handles.") from None
    return Status(201, delegation_out(delegation))


@router.delete("/{delegation_id}", response={204: None})
def end_delegation(request, delegation_id: DelegationId):
    """End a delegation now (yours, given or received): the delegate's decisions are refused from now on."""
    try:
        delegations.end(request.auth, delegation_id)
    except Delegation.DoesNotExist:
        raise Http404("No such delegation.") from None
    return Status(204, None)
