"""What every app mounted beside Django in hitl.asgi (A2A: agentlink.app; the MCP gateway:
mcpgateway.app) puts in front of its routes, as pure ASGI: the bearer token's user and the agent
(before any route runs), a cap on the body's declared length, HTTPS and its headers as Django's
SecurityMiddleware gives the pages, and Django's ALLOWED_HOSTS as Starlette spells them."""
import json
import re
from collections.abc import Callable

from django.conf import settings

from chat.models import ApiToken
from chat.selectors import agent_for


class Refused(Exception):
    """A request answered with `status` and this message by Authenticate (raised by its `user`)."""

    def __init__(self, status: int, detail: str):
        self.status = status
        super().__init__(detail)


class Authenticate:
    """The token's user and the agent of the path's `slug` go in `scope["hitl_user"]`,
    `scope["hitl_agent"]` (and the token's hash in `scope["hitl_token"]`), or the request is
    answered here: 404 for a path that is no agent's, 411/413 for a body without a length or over
    `max_body`, 401 with `WWW-Authenticate: Bearer` without a valid token, 404 for an agent the user
    may not use (the same answer as for one that does not exist). `database` runs the lookups on
    the app's own threads. An app that lets its users in another way too overrides `user`."""

    unauthenticated = "An API token is required: Authorization: Bearer <token>."

    def __init__(self, app, *, path: re.Pattern, database: Callable, max_body: int, not_found: str):
        self.app, self.path, self.max_body, self.not_found = app, path, max_body, not_found
        self.user_for = database(ApiToken.user_for)
        self.agent_for = database(agent_for)

    async def __call__(self, scope, receive, send):
        match = self.path.fullmatch(scope["path"])
        if match is None:
            return await error_response(send, 404, self.not_found)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if scope["method"] == "POST" and length is None:
            return await error_response(send, 411, "Send the request with a Content-Length.")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return await error_response(send, 413, f"The request body is over {self.max_body} bytes.")
        try:
            user = await self.user(scope, headers)
        except Refused as refused:
            return await error_response(send, refused.status, str(refused))
        if user is None:
            return await error_response(send, 401, self.unauthenticated, bearer=True)
        agent = await self.agent_for(user, match["slug"])
        if agent is None:
            return await error_response(send, 404, "No such agent.")
        scope["hitl_user"], scope["hitl_agent"] = user, agent
        await self.app(scope, receive, send)  # daphne reads no more than the Content-Length

    async def user(self, scope, headers: dict):
        """The bearer token's user (its hash in `scope["hitl_token"]`), or None."""
        key = bearer_key(headers)
        if not key:
            return None
        scope["hitl_token"] = ApiToken.hash_key(key)
        return await self.user_for(key)


def bearer_key(headers: dict) -> str:
    """The token of an `Authorization: Bearer <token>` header; empty without one."""
    scheme, _, key = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    return key.strip() if scheme.lower() == "bearer" else ""


async def error_response(send, status: int, detail: str, *, bearer: bool = False, headers: list | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Secure:
    """What Django's SecurityMiddleware does for the pages, for these responses: HTTPS only where
    the site redirects to it (a token already sent in clear is refused, not redirected), HSTS,
    nosniff and no caching. `name` says what is served ("A2A", "MCP") in the refusal.

    One exception to no-store: a response on a path that `cacheable` matches keeps the
    Cache-Control it says (the A2A agent card: private, with an ETag, agentlink.app.card). Every
    other answer, each JSON-RPC one among them, is no-store."""

    def __init__(self, app, *, name: str, cacheable: re.Pattern | None = None):
        self.app, self.name, self.cacheable = app, name, cacheable

    async def __call__(self, scope, receive, send):
        if settings.SECURE_SSL_REDIRECT and not is_https(scope):
            return await error_response(send, 403, f"{self.name} is served over HTTPS only.")
        extra = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]
        if settings.SECURE_HSTS_SECONDS and is_https(scope):
            hsts = f"max-age={settings.SECURE_HSTS_SECONDS}" + ("; includeSubDomains" if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS else "")
            extra.append((b"strict-transport-security", hsts.encode()))

        keeps_own = self.cacheable is not None and self.cacheable.fullmatch(scope.get("path", "")) is not None

        async def send_secured(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                says_own = keeps_own and any(name.lower() == b"cache-control" for name, _ in headers)
                message = message | {"headers": headers + extra + ([] if says_own else [(b"cache-control", b"no-store")])}
            await send(message)

        await self.app(scope, receive, send_secured)


def is_https(scope) -> bool:
    if scope.get("scheme") == "https":
        return True
    header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if header:
        name = header[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        return dict(scope.get("headers") or []).get(name, b"").decode("latin-1").split(",")[0].strip() == header[1]
    return False


def allowed_hosts() -> list[str]:
    """Django's ALLOWED_HOSTS as Starlette spells them (".example.com" is "*.example.com" too)."""
    hosts = []
    for host in settings.ALLOWED_HOSTS:
        hosts += [host.lstrip("."), "*" + host] if host.startswith(".") else [host, host.strip("[]")]
    return hosts
