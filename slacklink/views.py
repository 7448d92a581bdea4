"""Slack's endpoints (the slash command, interactions and events: signed, new, then handled) and the
profile page's Slack section (a one-time link code, unlink)."""
import logging

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core.inputs import ANY_TEXT, BadInput, parse_json

from . import accounts, client, commands, events, interactions, verification
from .models import SeenRequest, SlackAccount

logger = logging.getLogger(__name__)
MAX_BODY = 200_000  # an interaction's payload carries the whole message: a few tens of kilobytes


def profile_context(request) -> dict:
    return {"account": SlackAccount.objects.filter(user=request.user).first(), "enabled": client.enabled()}


@login_required
@require_POST
def new_code(request) -> HttpResponse:
    if not client.enabled():
        raise Http404
    code = accounts.issue_code(request.user)
    context = profile_context(request) | {"code": code, "minutes": settings.HITL_SLACK_CODE_MINUTES}
    return render(request, "slacklink/code.html", context)


@login_required
@require_POST
def unlink(request) -> HttpResponse:
    accounts.unlink_user(request.user)
    return redirect("/profile/#slack")


def _refusal(request) -> JsonResponse | None:
    """Why a request claiming to be Slack's is not taken (a 4xx), or None."""
    if not client.enabled():
        return JsonResponse({"detail": "Slack is not set up here."}, status=404)
    if len(request.body) > MAX_BODY:
        return JsonResponse({"detail": "Too large."}, status=413)
    try:
        verification.check(request.body, request.headers)
    except verification.Refused as exc:
        return JsonResponse({"detail": str(exc)}, status=exc.status)
    return None


@csrf_exempt  # Slack posts here: its signature stands for the CSRF token
@require_POST
def slash_command(request) -> HttpResponse:
    if refused := _refusal(request):
        return refused
    return JsonResponse({"response_type": "ephemeral", "text": commands.handle(request.POST)})


@csrf_exempt
@require_POST
def interaction(request) -> HttpResponse:
    if refused := _refusal(request):
        return refused
    try:
        # A typed reason is cleaned where it is read, and still rejects: any text here.
        payload = parse_json(request.POST.get("payload", ""), most_bytes=len(request.body), text=ANY_TEXT)
    except BadInput:
        return JsonResponse({"detail": "No JSON payload."}, status=400)
    if not isinstance(payload, dict):
        return JsonResponse({"detail": "The payload is not an object."}, status=400)
    try:
        answer = interactions.handle(payload)
    except Exception:  # a payload no test foresaw: said and logged, never a 500 that Slack shows as a failure
        logger.exception("slack: an interaction could not be handled")
        return JsonResponse({"detail": "That interaction could not be handled."}, status=400)
    return JsonResponse(answer) if answer else HttpResponse(status=200)


@csrf_exempt
@require_POST
def event(request) -> HttpResponse:
    """The Events API: the URL check Slack makes once (its `challenge` answered), then each event
    once (a retry of one already handled, by its event_id, is acknowledged and dropped)."""
    if refused := _refusal(request):
        return refused
    try:
        payload = parse_json(request.body, most_bytes=len(request.body), text=ANY_TEXT)
    except BadInput:
        return JsonResponse({"detail": "No JSON body."}, status=400)
    if not isinstance(payload, dict):
        return JsonResponse({"detail": "The body is not an object."}, status=400)
    if payload.get("type") == "url_verification":
        return JsonResponse({"challenge": str(payload.get("challenge", ""))[:200]})
    event_id, inner = payload.get("event_id"), payload.get("event")
    if payload.get("type") != "event_callback" or not isinstance(inner, dict) or not isinstance(event_id, str):
        return HttpResponse(status=200)  # nothing for us: acknowledged, so Slack does not retry it
    seen, new = SeenRequest.objects.get_or_create(signature=f"event:{event_id}"[:80])
    if not new:
        return HttpResponse(status=200)
    try:
        events.handle(str(payload.get("team_id") or ""), inner)
    except Exception:  # never a 500, which Slack would retry: said in the log
        logger.exception("slack: event %s could not be handled", event_id)
    return HttpResponse(status=200)
