"""Who runs an AG-UI agent: the bearer token's user (`Authorization: Bearer …`, the JSON API's tokens),
or, for a page of this site (the example client at /agui/example/), the signed-in user of the
Django session cookie. As pure ASGI in front of the run route, like hitl.mounted.Authenticate (whose
answers it gives: 404 for a path or agent that is not the user's, 411/413 for a body without a
length or too long, 401 without a token or session), plus the session's own guard against
cross-site requests: a session run must come from this site's origin (the browser's `Origin`).

Session, not only tokens, because a page served by this site cannot be handed a token without
showing it to the page's scripts; a program uses a token."""
import re
from collections.abc import Callable
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth

from hitl import mounted
from hitl.mounted import is_https

UNAUTHENTICATED = ("A run needs an API token (Authorization: Bearer <token>), or, from a page of this site, "
                   "a signed-in session.")


def user_for_session(session_key: str):
    """The active signed-in user of that session, or None (checked as Django checks a page's: the
    session's backend and its hash of the password, so a password change signs it out)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = auth.get_user(SimpleNamespace(session=store))
    return user if user.is_authenticated and user.is_active else None


def is_same_origin(scope) -> bool:
    """The request's `Origin` is this site's (as the browser reached it) or a trusted one: a session
    cookie is sent by the browser with any site's request, so a run on it needs proof of where it
    came from, as Django's CSRF check asks of the pages' POSTs."""
    headers = dict(scope.get("headers") or [])
    origin = headers.get(b"origin", b"").decode("latin-1").strip()
    host = headers.get(b"host", b"").decode("latin-1").strip()
    if not origin or not host or origin == "null":
        return False
    own = f"{'https' if is_https(scope) else 'http'}://{host}"
    return origin == own or origin in settings.CSRF_TRUSTED_ORIGINS


def session_key_of(scope) -> str:
    cookies = dict(scope.get("headers") or []).get(b"cookie", b"").decode("latin-1")
    for pair in cookies.split(";"):
        name, _, value = pair.strip().partition("=")
        if name == settings.SESSION_COOKIE_NAME and re.fullmatch(r"[a-z0-9]{1,64}", value):
            return value
    return ""


class Authenticate(mounted.Authenticate):
    """hitl.mounted.Authenticate, with POST only and the session's way in (see the module)."""

    unauthenticated = UNAUTHENTICATED

    def __init__(self, app, *, path: re.Pattern, database: Callable, max_body: int):
        super().__init__(app, path=path, database=database, max_body=max_body,
                         not_found="Not found: AG-UI agents live at /agui/<agent slug>/.")
        self.user_for_session = database(user_for_session)

    async def __call__(self, scope, receive, send):
        if self.path.fullmatch(scope["path"]) and scope["method"] != "POST":
            return await mounted.error_response(send, 405, "POST a RunAgentInput to run the agent.", headers=[(b"allow", b"POST")])
        await super().__call__(scope, receive, send)

    async def user(self, scope, headers: dict):
        if headers.get(b"authorization"):  # a token given is the only way in: a bad one is not rescued by a cookie
            return await super().user(scope, headers)
        session_key = session_key_of(scope)
        if not session_key:
            return None
        user = await self.user_for_session(session_key)
        if user is not None and not is_same_origin(scope):
            raise mounted.Refused(403, "A run on a session cookie must come from this site's pages (Origin).")
        return user
