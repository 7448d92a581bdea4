"""The service worker at the site root, storing and removing a browser's subscription (a session
and its CSRF token), the decisions a notification's actions POST (the token is the proof), the
reject form a notification's Reject opens, and a warning's Extend."""
import logging
from pathlib import Path

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from approvals import services, tokens
from approvals.models import Approval
from approvals.permissions import can_see
from approvals.summary import summarize
from core.inputs import ANY_TEXT, STORABLE, BadInput, parse_json

from . import keys, pushservice, subscriptions, texts
from .channel import open_extend_token
from .texts import outcome_line
from .models import PushSubscription

logger = logging.getLogger(__name__)
SERVICE_WORKER = Path(__file__).resolve().parent / "static" / "pushlink" / "sw.js"
MAX_BODY_BYTES = 10_000
MAX_REASON_CHARS = 2000


def profile_context(request) -> dict:
    """The profile page's section: the button, the key it subscribes with, this person's devices."""
    enabled, public_key = pushservice.enabled(), ""
    if enabled:
        try:
            public_key = keys.public_key()
        except (ImproperlyConfigured, OSError) as exc:  # a bad key or an unwritable VAR_DIR: the page still works
            logger.error("push: no VAPID key: %s", exc)
            enabled = False
    return {
        "enabled": enabled,
        "vapid_public_key": public_key,
        "devices": PushSubscription.objects.filter(user=request.user).order_by("-created_at"),
    }


@require_GET
def service_worker(request) -> HttpResponse:
    response = HttpResponse(SERVICE_WORKER.read_bytes(), content_type="text/javascript; charset=utf-8")
    response["Service-Worker-Allowed"] = "/"
    response["Cache-Control"] = "no-cache"  # browsers check for a new worker on each registration
    return response


@require_http_methods(["POST", "DELETE"])
def subscriptions_view(request) -> JsonResponse:
    """POST stores the browser's subscription as this person's device; DELETE ({endpoint}) removes it."""
    if not request.user.is_authenticated:
        return JsonResponse({"detail": "Log in first."}, status=403)
    if not pushservice.enabled():
        return JsonResponse({"detail": "Notifications are off on this site."}, status=404)
    try:
        data = _json(request)
        if request.method == "DELETE":
            endpoint = data.get("endpoint") if isinstance(data, dict) else None
            if not isinstance(endpoint, str):
                raise subscriptions.BadSubscription("Say which endpoint to remove.")
            removed, _ = PushSubscription.objects.filter(user=request.user, endpoint=endpoint).delete()
            return JsonResponse({"removed": bool(removed)}, status=200 if removed else 404)
        subscription = subscriptions.save(request.user, **subscriptions.parse(data), user_agent=request.headers.get("User-Agent", ""))
    except subscriptions.BadSubscription as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    return JsonResponse({"id": subscription.pk, "device": subscription.device}, status=201)


@login_required
@require_POST
def remove(request, pk: int) -> HttpResponse:
    """The profile page's Remove: a plain form."""
    get_object_or_404(PushSubscription, pk=pk, user=request.user).delete()
    return redirect("/profile/#push")


@csrf_exempt  # the service worker posts a single-use signed token: it is the proof, not a session
@require_POST
def decide(request) -> JsonResponse:
    try:
        data = _json(request, text=ANY_TEXT)  # a typed reason is cleaned where it is read, and still rejects
        value, decision = data.get("token"), data.get("decision")
        reason = data.get("reason") or ""
        if not isinstance(value, str) or decision not in ("approve", "reject") or not isinstance(reason, str):
            raise ValueError
    except (ValueError, AttributeError, subscriptions.BadSubscription):
        return _answer(400, "bad request", 'Send {"token": ..., "decision": "approve" or "reject"}.')
    return _answer(*redeem(value, approve=decision == "approve", reason=reason))


def redeem(value: str, *, approve: bool, reason: str = "") -> tuple[int, str, str, Approval | None]:
    """Decide with a notification's token: (HTTP status, outcome, message, approval)."""
    opened = None
    try:
        opened = tokens.open_token(value)
        if opened.token.channel != "push":
            raise tokens.TokenInvalid
        approval = tokens.redeem(value, approve=approve, reason=reason.strip()[:MAX_REASON_CHARS])
    except tokens.TokenInvalid:
        return 403, "invalid", "This notification's action is not valid.", None
    except tokens.TokenExpired:
        return 403, "expired", "This notification has expired: open the site.", None
    except tokens.TokenUsed:
        return 409, "used", "This notification was already used.", opened.approval
    except services.AlreadyDecided as exc:
        return 409, "already decided", f"Too late: {outcome_line(exc.approval)}.", exc.approval
    except services.ShownCut:
        # A forged approve with the token of a notification that showed the call cut: the site shows it whole.
        return 409, "decide on the site", services.SHOWN_CUT, opened.approval
    except services.ArgumentsChanged:
        return 409, "changed", "The call was edited after this notification: open the site to see it.", None
    except services.AlreadyVoted:
        return 409, "already voted", "Your vote is already counted.", None
    except services.StepUpRequired as exc:
        return 409, "decide on the site", str(exc), None
    except (services.ConfirmationRequired, services.WrongKind, services.InvalidAnswer):
        return 409, "decide on the site", "Decide this one on the site.", None
    except services.NotAllowed:
        return 403, "not allowed", "You may not decide this call.", None
    except services.DecisionError:
        return 409, "refused", "The decision was refused: open the site.", None
    if approval.status == approval.Status.PENDING:
        return 200, "voted", "Your approval is counted; it waits for more.", approval
    return 200, approval.status, f"{approval.status.capitalize()}.", approval


@require_http_methods(["GET", "POST"])
def reject(request) -> HttpResponse:
    """The reject form a notification's Reject opens (browsers' notifications have no inline reply):
    it asks why, and its POST rejects. The token travels in the page's #fragment, which no request
    line, log or trace carries; static/pushlink/reject.js moves it into the form. GET decides nothing."""
    if request.method == "GET":
        return TemplateResponse(request, "pushlink/reject.html", {"state": "form"})
    value, reason = request.POST.get("token", ""), request.POST.get("reason", "")
    if not value or len(value) > 500:  # a reason past the form's maxlength is cut, as every channel's
        return TemplateResponse(request, "pushlink/reject.html", {"state": "invalid", "message": "This reject form is not valid."}, status=400)
    status, outcome, message, approval = redeem(value, approve=False, reason=reason)
    if status == 200:
        message = outcome_line(approval)
    context = {"state": "done" if status == 200 else outcome, "message": message, "approval": approval,
               "url": texts.view_url(approval) if approval is not None else "/"}
    return TemplateResponse(request, "pushlink/reject.html", context, status=status)


@csrf_exempt  # the reject page's script reads what its token rejects: the token is the proof
@require_POST
def reject_call(request) -> JsonResponse:
    """What the reject form's token would reject, in words (its sentence and who asked), or why it cannot."""
    try:
        value = _json(request).get("token")
        if not isinstance(value, str):
            raise ValueError
        opened = tokens.open_token(value)
        if opened.token.channel != "push":
            raise tokens.TokenInvalid
    except (ValueError, AttributeError, subscriptions.BadSubscription, tokens.TokenInvalid):
        return JsonResponse({"state": "invalid", "message": "This reject form is not valid: open the site."}, status=403)
    approval = Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=opened.approval.pk)
    if not can_see(opened.token.user, approval):  # its holder lost the right since: the token tells nothing
        return JsonResponse({"state": "not allowed", "message": "You may no longer see this call."}, status=403)
    body = {"approval_id": approval.pk, "url": texts.view_url(approval), "state": "form"}
    if approval.status != Approval.Status.PENDING:
        body |= {"state": "already decided", "message": f"Already decided: {outcome_line(approval)}."}
    elif opened.used:
        body |= {"state": "used", "message": "This notification was already used."}
    elif opened.expired:
        body |= {"state": "expired", "message": "This notification has expired: open the site."}
    elif opened.changed:
        body |= {"state": "changed", "message": "The call was edited after this notification: open the site to see it."}
    else:
        summary = summarize(approval)
        body |= {"sentence": summary.sentence, "asked_by": summary.asked_by, "risk": summary.risk}
    return JsonResponse(body)


@csrf_exempt  # the service worker posts the warning's signed token: it is the proof
@require_POST
def extend(request) -> JsonResponse:
    """A warning's Extend: pushes the deadline back once, as the warned device's owner, via push."""
    try:
        value = _json(request).get("token")
        if not isinstance(value, str):
            raise ValueError
    except (ValueError, AttributeError, subscriptions.BadSubscription):
        return _answer(400, "bad request", 'Send {"token": ...}.')
    named = open_extend_token(value)
    if named is None:
        return _answer(403, "invalid", "This notification's action is not valid.")
    try:
        approval = services.extend(named[0], user=named[1], via="push")
    except (Approval.DoesNotExist, services.NotAllowed):
        return _answer(403, "not allowed", "You may not extend this call's deadline.")
    except services.AlreadyDecided as exc:
        return _answer(409, "already decided", f"Too late: {outcome_line(exc.approval)}.", exc.approval)
    except services.NotExtendable as exc:
        return _answer(409, "not extendable", str(exc))
    return _answer(200, "extended", f"Extended: it now expires at {approval.expires_at:%H:%M} UTC.", approval)


def _json(request, text: str = STORABLE):
    try:
        return parse_json(request.body, most_bytes=MAX_BODY_BYTES, text=text)
    except BadInput as exc:
        raise subscriptions.BadSubscription(str(exc)) from None


def _answer(status: int, outcome: str, message: str, approval=None) -> JsonResponse:
    body = {"outcome": outcome, "message": message}
    if approval is not None:
        body |= {"approval_id": approval.pk, "status": approval.status, "decided_via": approval.decided_via,
                 "decided_by": approval.decided_by.get_username() if approval.decided_by_id else None}
    return JsonResponse(body, status=status)
