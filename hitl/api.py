"""The JSON API: session (with CSRF) or bearer-token auth, errors as {"detail": ...}."""
from django.http import Http404
from ninja import NinjaAPI
from ninja.security import HttpBearer, SessionAuth

from approvals.api import router as approvals_router
from approvals.services import AlreadyDecided, NotAllowed
from chat.api import router as chat_router
from chat.models import ApiToken
from chat.services import InvalidMessage, NotOwner


class BearerToken(HttpBearer):
    def authenticate(self, request, token: str):
        api_token = ApiToken.objects.select_related("user").filter(key_hash=ApiToken.hash_key(token)).first()
        if api_token is None or not api_token.user.is_active:
            return None
        api_token.note_use()
        request.user = api_token.user
        return api_token.user


api = NinjaAPI(
    title="hitl",
    version="1",
    description="Chat with an agent whose risky tool calls wait for a human decision.",
    auth=[BearerToken(), SessionAuth()],
    urls_namespace="api",
)
api.add_router("/conversations", chat_router)
api.add_router("/approvals", approvals_router)


@api.exception_handler(Http404)
def not_found(request, exc: Http404):
    # The same words with DEBUG on or off; it never says whether the object exists for someone else.
    return api.create_response(request, {"detail": str(exc) or "Not found."}, status=404)


@api.exception_handler(AlreadyDecided)
def already_decided(request, exc: AlreadyDecided):
    return api.create_response(request, {"detail": str(exc), "status": exc.approval.status}, status=409)


@api.exception_handler(NotAllowed)
@api.exception_handler(NotOwner)
def not_allowed(request, exc: Exception):
    return api.create_response(request, {"detail": str(exc)}, status=403)


@api.exception_handler(InvalidMessage)
def invalid_message(request, exc: InvalidMessage):
    return api.create_response(request, {"detail": str(exc)}, status=400)
