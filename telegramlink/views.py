"""The Telegram page (link with a one-time code, unlink) and the webhook Telegram posts updates to:
a secret path, and the secret header checked on every update."""
import hashlib
import hmac
import logging

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from core.inputs import ANY_TEXT, BadInput, parse_json

from . import accounts, bot, updates
from .models import TelegramAccount

logger = logging.getLogger(__name__)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_UPDATE_BYTES = 1_000_000


def webhook_secret(purpose: str) -> str:
    """Derived from SECRET_KEY and the bot's token: no setting to keep, and a new token changes it."""
    key = f"{settings.SECRET_KEY}:{settings.TELEGRAM_BOT_TOKEN}".encode()
    return hmac.new(key, f"telegram-{purpose}".encode(), hashlib.sha256).hexdigest()[:48]


def profile_context(request) -> dict:
    """The profile page's Telegram section: linked or not."""
    return {"account": TelegramAccount.objects.filter(user=request.user).first(), "enabled": bot.enabled()}


@login_required
@require_GET
def telegram_page(request) -> HttpResponse:
    account = TelegramAccount.objects.filter(user=request.user).first()
    return render(request, "telegramlink/telegram.html", {"account": account, "enabled": bot.enabled()})


@login_required
@require_POST
def new_code(request) -> HttpResponse:
    if not bot.enabled():
        raise Http404
    code = accounts.issue_code(request.user)
    account = TelegramAccount.objects.filter(user=request.user).first()
    context = {"account": account, "enabled": True, "code": code, "minutes": settings.HITL_TELEGRAM_CODE_MINUTES}
    return render(request, "telegramlink/telegram.html", context)


@login_required
@require_POST
def unlink(request) -> HttpResponse:
    accounts.unlink_user(request.user)
    return redirect("telegramlink:page")


@csrf_exempt  # Telegram posts here: the secret path and header stand for the CSRF token
@require_POST
def webhook(request, secret: str) -> HttpResponse:
    if not bot.enabled() or not hmac.compare_digest(secret.encode(), webhook_secret("path").encode()):
        raise Http404
    if not hmac.compare_digest(request.headers.get(SECRET_HEADER, "").encode(), webhook_secret("header").encode()):
        return HttpResponseForbidden("Wrong secret token.")
    if len(request.body) > MAX_UPDATE_BYTES:
        return JsonResponse({"detail": "Too large."}, status=413)
    try:
        # Any text: an update is answered 200 whatever a message holds (its handler cleans what it
        # keeps), else Telegram would deliver it again and again.
        update = parse_json(request.body, most_bytes=MAX_UPDATE_BYTES, text=ANY_TEXT)
    except BadInput as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    if isinstance(update, dict):
        updates.handle(update)
    return JsonResponse({"ok": True})
