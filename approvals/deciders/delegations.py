"""Delegation: an approver hands what they may decide to a colleague for a time window (a holiday).
In the window the delegate decides as the delegator (approvals.deciders.routing.acting_as); each decision
and vote records `on_behalf_of`. Made and ended early through here only: both are links of the
audit chain."""
import logging

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.inputs import is_storable

from .. import audit
from . import routing
from ..models import Delegation

logger = logging.getLogger(__name__)


class InvalidDelegation(ValueError):
    """A delegation that cannot be: to oneself, to nobody, or a window already over. Nothing saved."""


class NotAnApprover(Exception):
    """Only someone who may decide something (a route group member, a global approver) delegates."""


def delegate(user, *, to: str, starts_at, ends_at, now=None) -> Delegation:
    now = now or timezone.now()
    if routing.asks_only(user):
        raise NotAnApprover(routing.ASKING_TOKEN)
    if not (user and user.is_authenticated and routing.Powers(user).has_own_powers()):
        raise NotAnApprover("Only an approver (a member of a route's group, or a global approver) may delegate what they may decide.")
    if not isinstance(to, str) or not is_storable(to):
        raise InvalidDelegation("`to` is a username.")
    delegate_ = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: to}, is_active=True).first()
    if delegate_ is None:
        raise InvalidDelegation(f"Unknown user {to!r}.")
    if delegate_.pk == user.pk:
        raise InvalidDelegation("You cannot delegate to yourself.")
    if ends_at <= starts_at:
        raise InvalidDelegation("`ends_at` must be after `starts_at`.")
    if ends_at <= now:
        raise InvalidDelegation("`ends_at` must be in the future: this window is already over.")
    with transaction.atomic():
        head = audit.lock_head()
        delegation = Delegation(delegator=user, delegate=delegate_, starts_at=starts_at, ends_at=ends_at, created_at=now)
        audit.link_delegation(head, delegation)
        delegation.save()
    logger.info("delegation %s: %s to %s from %s to %s", delegation.pk, user, delegate_, starts_at, ends_at)
    return delegation


def end(user, delegation_id: int, *, now=None) -> Delegation:
    """End a delegation now, early: by its delegator or its delegate. One already over stays as it
    is. Raises Delegation.DoesNotExist for anyone else's."""
    now = now or timezone.now()
    delegation = visible(user).filter(pk=delegation_id).first()
    if delegation is None:
        raise Delegation.DoesNotExist
    if delegation.ended_at is not None or delegation.ends_at <= now:
        return delegation
    with transaction.atomic():
        head = audit.lock_head()
        delegation.ended_at, delegation.ended_by = now, user
        link = audit.link_delegation_end(head, delegation)
        if not Delegation.objects.filter(pk=delegation.pk, ended_at__isnull=True).update(ended_at=now, ended_by=user, **link):
            delegation.refresh_from_db()  # ended a moment ago by the other side
            return delegation
    logger.info("delegation %s ended early by %s", delegation.pk, user)
    return delegation


def visible(user):
    """The delegations `user` gave or received, newest window first."""
    if not (user and user.is_authenticated):
        return Delegation.objects.none()
    return Delegation.objects.filter(Q(delegator=user) | Q(delegate=user)).select_related("delegator", "delegate", "ended_by")
