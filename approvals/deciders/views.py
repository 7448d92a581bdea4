"""The delegations page, at /approvals/delegations/: hand what you may decide to a colleague for a
while (a holiday), see what you gave and received, end one early. The rules: approvals.deciders.delegations."""
from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from . import delegations
from ..models import Delegation
from ..permissions import may_approve_anything
from ..selectors import powers_for

MAX_LISTED = 200


class BadWindow(ValueError):
    """A start or an end that is no date and time."""


@login_required
@require_GET
def delegations_page(request) -> HttpResponse:
    return _page(request, _form_defaults())


@login_required
@require_POST
def create_delegation(request) -> HttpResponse:
    form = {key: request.POST.get(key, "").strip()[:200] for key in ("to", "starts", "ends")}
    try:
        delegations.delegate(request.user, to=form["to"], starts_at=_when(form["starts"], "start"), ends_at=_when(form["ends"], "end"))
    except delegations.NotAnApprover as exc:
        return _page(request, form, error=str(exc), status=403)
    except (delegations.InvalidDelegation, BadWindow) as exc:
        return _page(request, form, error=_in_form_words(str(exc)), status=400)
    except OverflowError:
        return _page(request, form, error="That date is out of range.", status=400)
    return redirect("delegations:page")


@login_required
@require_POST
def end_delegation(request, delegation_id: int) -> HttpResponse:
    """End a delegation now (given or received): the delegate's decisions are refused from now on."""
    try:
        delegations.end(request.user, delegation_id)
    except Delegation.DoesNotExist:
        raise Http404("No such delegation.") from None
    return redirect("delegations:page")


def _page(request, form: dict, *, error: str = "", status: int = 200) -> HttpResponse:
    """The page for whoever may delegate, or holds delegations given to them (which they may end)."""
    may_delegate = may_approve_anything(request.user, powers_for(request))
    listed = list(delegations.visible(request.user)[:MAX_LISTED])
    if not may_delegate and not listed:
        raise PermissionDenied("Delegations are for approvers.")
    now = timezone.now()
    for delegation in listed:
        delegation.state = _state(delegation, now)
    context = {
        "given": [d for d in listed if d.delegator_id == request.user.pk],
        "received": [d for d in listed if d.delegate_id == request.user.pk],
        "form": form, "error": error, "may_delegate": may_delegate,
    }
    return render(request, "approvals/delegations.html", context, status=status)


def _state(delegation: Delegation, now) -> str:
    if delegation.ended_at is not None:
        return "ended"
    if delegation.ends_at <= now:
        return "over"
    return "active" if delegation.starts_at <= now else "upcoming"


def _form_defaults() -> dict:
    """From now for a week, as the form's date and time fields show them (UTC, to the minute)."""
    now = timezone.now().replace(second=0, microsecond=0)
    return {"to": "", "starts": _local(now), "ends": _local(now + timedelta(days=7))}


def _local(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%dT%H:%M")


def _when(value: str, name: str) -> datetime:
    """A `datetime-local` field's value ("2026-11-25T09:00"), in the site's time zone unless it says one."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadWindow(f"Give the {name} as a date and time (2026-11-25T09:00).") from None
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


def _in_form_words(message: str) -> str:
    """The service's message (written for the API's fields) in the form's words."""
    words = message.replace("`ends_at`", "the end").replace("`starts_at`", "the start").replace("`to`", "“To”")
    return words[:1].upper() + words[1:]
