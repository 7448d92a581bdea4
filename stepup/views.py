"""The passkey pages' posts: the profile section's register and remove, and the card's step-up approve."""
import json

from django.contrib.auth import authenticate
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from approvals import services
from approvals.models import Approval
from core.inputs import BadInput, parse_json

from . import ceremony, hosts
from .models import Passkey

MAX_BODY_BYTES = 64 * 1024  # a passkey's answer is a few kB; an attestation with a certificate chain, more


def profile_context(request) -> dict:
    """The passkeys section's: the person's passkeys, and `ip_host` when the page was opened at an IP
    address, where no passkey can be added or used (the section says where to go instead)."""
    return {"passkeys": list(request.user.passkeys.all()), "ip_host": hosts.ip_host(request)}


@login_required
@require_POST
def registration_options(request) -> HttpResponse:
    """Options for a new passkey, once the person has typed their password again: a session alone
    (a script holding it) must not be able to add the key that step-up then trusts."""
    body = _body(request)
    password = body.get("password")
    if not isinstance(password, str) or authenticate(request, username=request.user.get_username(), password=password) is None:
        return _refused("Type your password to add a passkey.", 403)
    try:
        return HttpResponse(ceremony.registration_options(request, request.user), content_type="application/json")
    except ceremony.CeremonyFailed as exc:
        return _refused(str(exc))


@login_required
@require_POST
def register(request) -> HttpResponse:
    body = _body(request)
    name = body.get("name")
    try:
        passkey = ceremony.register(request, request.user, name=name if isinstance(name, str) else "", credential=body.get("credential"))
    except ceremony.CeremonyFailed as exc:
        return _refused(str(exc))
    # The row the profile's list shows, so that the page adds it without a reload.
    row = render_to_string("stepup/passkey_row.html", {"passkey": passkey}, request=request)
    return JsonResponse({"id": passkey.pk, "name": passkey.name, "row": row}, status=201)


@login_required
@require_POST
def remove(request, passkey_id: int) -> HttpResponse:
    deleted, _ = Passkey.objects.filter(pk=passkey_id, user=request.user).delete()
    if not deleted:
        raise Http404("No such passkey.")
    return redirect("/profile/#passkeys")


@login_required
@require_POST
def approval_options(request, approval_id: int) -> HttpResponse:
    """The card's first step: is a passkey needed to approve this version, and the challenge if so.
    Refuses now what approving would refuse (not yours, decided, changed, a wrong confirmation)."""
    body = _body(request)
    shown_hash, confirmation = body.get("shown_hash"), body.get("confirmation", "")
    if not isinstance(shown_hash, str) or not isinstance(confirmation, str):
        return _refused("Send the version you were shown (shown_hash).")
    try:
        services.check_decidable(approval_id, request.user, approve=True, shown_hash=shown_hash)
        return JsonResponse({"step_up": False})  # an ordinary approval: the card's form decides it
    except services.StepUpRequired:
        pass
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except services.DecisionError as exc:
        return _refused(str(exc), 409)
    approval = Approval.objects.get(pk=approval_id)
    if approval.confirmation_required and confirmation.strip() != approval.confirmation_hint:
        return _refused(f"Type {approval.confirmation_hint!r} to approve this critical call.")
    try:
        options = ceremony.approval_options(request, request.user, approval)
    except ceremony.CeremonyFailed as exc:
        return _refused(str(exc))
    return JsonResponse({"step_up": True, "options": json.loads(options)})


@login_required
@require_POST
def approve(request, approval_id: int, via: str) -> HttpResponse:
    """The card's second step: verify the passkey's answer, then approve through the decision
    service with the proof (the typed confirmation of a critical call is still checked there).
    `via` is the route's (the chat's card or the dashboard's), whatever the body says."""
    body = _body(request)
    confirmation, comment = body.get("confirmation", ""), body.get("comment", "")
    if not isinstance(confirmation, str) or not isinstance(comment, str):
        return _refused("Send confirmation and comment as text.")
    try:
        proof = ceremony.prove(request, request.user, approval_id=approval_id, credential=body.get("credential"))
        approval = services.decide(
            approval_id, user=request.user, approve=True, via=via, shown_hash=proof.shown_hash,
            confirmation=confirmation, comment=comment[:2000], step_up=proof,
        )
    except ceremony.CeremonyFailed as exc:
        return _refused(str(exc))
    except Approval.DoesNotExist:
        raise Http404("No such approval.") from None
    except services.DecisionError as exc:
        return _refused(str(exc), 409)
    return JsonResponse({"id": approval.pk, "status": approval.status})


def _body(request) -> dict:
    """The JSON object posted; {} for anything else (too large, not JSON, too deep, not text), which
    each view then refuses as missing what it needs (a 400 that says what to send)."""
    try:
        body = parse_json(request.body or b"{}", most_bytes=MAX_BODY_BYTES)
    except BadInput:
        return {}
    return body if isinstance(body, dict) else {}


def _refused(detail: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"detail": detail}, status=status)
