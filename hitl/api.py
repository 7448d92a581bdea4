"""The JSON API: session (with CSRF) or bearer-token auth, errors as {"detail": ...}."""
import json
import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.parser import Parser
from ninja.security import HttpBearer, SessionAuth

from approvals.api import TooManyWaiting
from approvals.api import router as approvals_router
from approvals.policy.api import router as rules_router
from approvals.policy.rulemaking import InvalidRule, ScopeNotAllowed, TargetNotFound
from approvals.policy.calls import InvalidArguments
from approvals.services import (
    AlreadyDecided,
    AlreadyVoted,
    ArgumentsChanged,
    ConfirmationRequired,
    EditForbidden,
    InvalidAnswer,
    NotAllowed,
    OutcomeConflict,
    StepUpRequired,
    WrongKind,
)
from chat.api import router as chat_router
from chat.models import ApiToken
from chat.outside import InvalidRequest, NotTheRequester
from chat.quotas import QuotaExceeded
from chat.services import InvalidMessage, NotOwner, UnknownAgent
from core.inputs import has_surrogate
from core.middleware import DATABASE_RETRY_SECONDS, DATABASE_UNAVAILABLE

logger = logging.getLogger(__name__)


class BearerToken(HttpBearer):
    def authenticate(self, request, token: str):
        user = ApiToken.user_for(token)
        if user is not None:
            request.user = user
        return user


class SessionUnlessBearer(SessionAuth):
    """The session cookie (with its CSRF check), for a browser: never for a request that sends a
    bearer token, which is a program's and is answered 401 when the token is wrong (the session's
    CSRF check would say 403 "CSRF check failed", which tells a program nothing)."""

    def __call__(self, request):
        if request.headers.get("Authorization", "").lower().startswith("bearer "):
            return None
        return super().__call__(request)


class UnstorableText(ValueError):
    pass


class StorableJSON(Parser):
    """JSON bodies whose every string is Unicode text. A lone UTF-16 surrogate ("\\ud800") is valid
    JSON syntax but no text a database can store: refused here (400), once for every route. (NULs
    are refused where they are read, with a message naming the field.)"""

    def parse_body(self, request):
        data = json.loads(request.body)
        if has_surrogate(data):
            raise UnstorableText("The request body holds a lone UTF-16 surrogate, which is not text.")
        return data


api = NinjaAPI(
    title="hitl",
    version="1",
    description="Chat with an agent whose risky tool calls wait for a human decision.",
    auth=[BearerToken(), SessionUnlessBearer()],
    urls_namespace="api",
    parser=StorableJSON(),
)
api.add_router("/conversations", chat_router)
api.add_router("/approvals", approvals_router)
api.add_router("/approvals", "chat.outside_api.outcome_router")
api.add_router("/approval-requests", "chat.outside_api.router")
api.add_router("/rules", "approvals.policy.simulate_api.router")  # before /rules/{rule_id}, which would take "simulate"
api.add_router("/rules", rules_router)
api.add_router("/analytics", "approvals.analytics.api.router")
api.add_router("/agents", "chat.agents_api.router")
api.add_router("/tool-calls", "chat.undo_api.router")
api.add_router("/routes", "approvals.deciders.route_api.router")
api.add_router("/delegations", "approvals.deciders.delegation_api.router")


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    # ninja reports any parser error as "Cannot parse request body"; ours says what is wrong.
    detail = str(exc.__cause__) if isinstance(exc.__cause__, UnstorableText) else str(exc)
    return api.create_response(request, {"detail": detail}, status=exc.status_code)


@api.exception_handler(Http404)
def not_found(request, exc: Http404):
    # The same words with DEBUG on or off; it never says whether the object exists for someone else.
    return api.create_response(request, {"detail": str(exc) or "Not found."}, status=404)


@api.exception_handler(InvalidRule)
def invalid_rule(request, exc: InvalidRule):
    return api.create_response(request, {"detail": str(exc)}, status=400)


@api.exception_handler(ScopeNotAllowed)
def scope_not_allowed(request, exc: ScopeNotAllowed):
    return api.create_response(request, {"detail": str(exc)}, status=403)


@api.exception_handler(TargetNotFound)
def target_not_found(request, exc: TargetNotFound):
    return api.create_response(request, {"detail": str(exc)}, status=404)


@api.exception_handler(AlreadyDecided)
def already_decided(request, exc: AlreadyDecided):
    return api.create_response(request, {"detail": str(exc), "status": exc.approval.status}, status=409)


@api.exception_handler(AlreadyVoted)
def already_voted(request, exc: AlreadyVoted):
    return api.create_response(request, {"detail": str(exc), "status": "pending"}, status=409)


@api.exception_handler(ArgumentsChanged)
def arguments_changed(request, exc: ArgumentsChanged):
    return api.create_response(request, {"detail": str(exc), "status": "pending"}, status=409)


@api.exception_handler(InvalidArguments)
@api.exception_handler(InvalidAnswer)
@api.exception_handler(WrongKind)
@api.exception_handler(ConfirmationRequired)
@api.exception_handler(EditForbidden)
def refused_decision(request, exc: Exception):
    # Nothing was decided or stored: the approval is still pending.
    return api.create_response(request, {"detail": str(exc)}, status=400)


@api.exception_handler(InvalidRequest)
def invalid_request(request, exc: InvalidRequest):
    return api.create_response(request, {"detail": str(exc), "field": exc.field}, status=400)


@api.exception_handler(OutcomeConflict)
def outcome_conflict(request, exc: OutcomeConflict):
    return api.create_response(request, {"detail": str(exc)}, status=409)


@api.exception_handler(NotAllowed)
@api.exception_handler(NotTheRequester)
@api.exception_handler(NotOwner)
def not_allowed(request, exc: Exception):
    return api.create_response(request, {"detail": str(exc)}, status=403)


@api.exception_handler(StepUpRequired)
def step_up_required(request, exc: StepUpRequired):
    # A token is no passkey: such a call is approved on the site; rejecting it here still works.
    return api.create_response(request, {"detail": str(exc), "status": "pending"}, status=403)


@api.exception_handler(DatabaseError)
def database_unavailable(request, exc: DatabaseError):
    # The database restarting, or out of connections: a 503 a program retries, never a 500.
    logger.warning("API %s %s: the database is unavailable: %s", request.method, request.path, exc)
    response = api.create_response(request, {"detail": DATABASE_UNAVAILABLE}, status=503)
    response["Retry-After"] = str(DATABASE_RETRY_SECONDS)
    return response


@api.exception_handler(TooManyWaiting)
def too_many_waiting(request, exc: TooManyWaiting):
    response = api.create_response(request, {"detail": str(exc)}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(QuotaExceeded)
def quota_exceeded(request, exc: QuotaExceeded):
    response = api.create_response(request, {"detail": str(exc)}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(UnknownAgent)
def unknown_agent(request, exc: UnknownAgent):
    # An agent this user may no longer use: unknown to them, as if it did not exist.
    return api.create_response(request, {"detail": str(exc)}, status=404)


@api.exception_handler(InvalidMessage)
def invalid_message(request, exc: InvalidMessage):
    return api.create_response(request, {"detail": str(exc)}, status=400)


@api.exception_handler(RequestDataTooBig)
def too_big(request, exc: RequestDataTooBig):
    return api.create_response(request, {"detail": "The request body is too large."}, status=413)
