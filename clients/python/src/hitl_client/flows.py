"""Each exchange with the API as a generator that does no I/O itself: it yields a `Call` (a request
to make) or a `Pause` (seconds to wait), is sent the `httpx.Response` (or has the transport error
thrown in), and returns its result. `Client` and `AsyncClient` drive the same generators, one
blocking and one with await, so both follow one set of rules: retries, long polls, parsing, errors."""
from __future__ import annotations

import math
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, Union

import httpx

from .decision import Decision
from .errors import HitlError, Unreachable

MAX_WAIT = 60
"""The longest the server holds one `GET /api/approvals/{id}?wait=N`."""
OUTCOMES = ("succeeded", "failed")
PENDING_STATUS = "pending"
MAX_RESULT = 20_000
"""The longest outcome text the server keeps: a longer one is shortened here rather than refused there."""

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    """Under the API's root, e.g. `approvals/12`."""
    json: Any = None
    params: Mapping[str, Any] | None = None
    holds: float = 0
    """Seconds the server may hold the answer (a long poll): the read timeout grows by as much."""


@dataclass(frozen=True)
class Pause:
    seconds: float


Step = Union[Call, Pause]
Flow = Generator[Step, Any, T]


@dataclass(frozen=True)
class Retry:
    """How a request that failed for a passing reason (the server restarting, a dropped connection,
    a 502/503/504 from a proxy) is tried again: up to `attempts` more times in a row, waiting
    `backoff` seconds, doubled each time up to `max_backoff`. The approval lives on the server, so a
    wait picks up where it was. A POST is tried again only when it surely never arrived."""

    attempts: int = 8
    backoff: float = 0.5
    max_backoff: float = 10.0

    def delay(self, failures: int) -> float:
        return min(self.max_backoff, self.backoff * 2.0 ** (failures - 1))


# Failures after which a GET is safe to send again.
PASSING_ERRORS = (httpx.NetworkError, httpx.TimeoutException, httpx.RemoteProtocolError)
PASSING_STATUSES = {502, 503, 504}
# A POST only when it never reached the server: a retry must not ask twice or report twice.
UNSENT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
UNSENT_STATUSES = {503}


def send(call: Call, retry: Retry, *, deadline: float | None = None) -> Flow[httpx.Response]:
    """Make `call`, retried as `retry` says and never past `deadline` (a `time.monotonic()`)."""
    idempotent = call.method == "GET"
    failures = 0
    while True:
        try:
            response: httpx.Response = yield call
        except httpx.TransportError as error:
            if not isinstance(error, PASSING_ERRORS if idempotent else UNSENT_ERRORS):
                maybe_sent = " and may have reached the server" if isinstance(error, PASSING_ERRORS) else ""
                raise Unreachable(f"{call.method} {call.path} failed{maybe_sent}: {error!r}") from error
            failure: HitlError = Unreachable(f"{call.method} {call.path}: {error!r}")
        else:
            if response.status_code not in (PASSING_STATUSES if idempotent else UNSENT_STATUSES):
                return response
            failure = error_of(response)
        failures += 1
        pause = retry.delay(failures)
        if failures > retry.attempts or (deadline is not None and time.monotonic() + pause > deadline):
            raise failure
        yield Pause(pause)


def approval_request(
    agent: str,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    reason: str | None = None,
    risk: str | None = None,
    preview: Mapping[str, str] | None = None,
    thread: str | None = None,
    expires_in: int | None = None,
) -> dict[str, Any]:
    """The body of `POST /api/approval-requests`: only the fields given."""
    if not isinstance(arguments, Mapping):
        raise TypeError(f"arguments must be a mapping of names to values, not {type(arguments).__name__}")
    body: dict[str, Any] = {"agent": agent, "tool": tool, "arguments": dict(arguments)}
    optional = {"reason": reason, "risk": risk, "preview": None if preview is None else dict(preview), "thread": thread, "expires_in": expires_in}
    return body | {name: value for name, value in optional.items() if value is not None}


def request_approval(
    body: dict[str, Any], *, wait: bool, timeout: float | None, retry: Retry, poll: int = MAX_WAIT
) -> Flow[Decision]:
    """Ask; then, if `wait` and nobody needed to decide at once, wait until decided or `timeout`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    response = yield from send(Call("POST", "approval-requests", json=body), retry)
    decision = approval_of(response)
    if not wait:
        return decision
    return (yield from wait_for(decision, deadline=deadline, retry=retry, poll=poll))


def wait_for(decision: Decision, *, deadline: float | None, retry: Retry, poll: int = MAX_WAIT) -> Flow[Decision]:
    """Long-poll, `poll` seconds at a time, until the approval leaves `pending` or `deadline` passes
    (then it is returned pending)."""
    poll = max(1, min(MAX_WAIT, poll))
    while decision.pending:
        seconds = poll if deadline is None else min(poll, math.ceil(deadline - time.monotonic()))
        if seconds <= 0:
            break
        decision = yield from get_approval(decision.id, wait=seconds, retry=retry, deadline=deadline)
    return decision


def get_approval(approval_id: int, *, wait: int, retry: Retry, deadline: float | None = None) -> Flow[Decision]:
    wait = max(0, min(MAX_WAIT, int(wait)))
    call = Call("GET", f"approvals/{int(approval_id)}", params={"wait": wait} if wait else None, holds=wait)
    return approval_of((yield from send(call, retry, deadline=deadline)))


def report_outcome(decision: Decision, status: str, result: str | None, *, retry: Retry) -> Flow[Decision]:
    """Say what happened when the approved call ran: once, for the version approved."""
    if status not in OUTCOMES:
        raise ValueError(f"status must be one of {OUTCOMES}, not {status!r}")
    body = {"status": status, "shown_hash": decision.shown_hash} | ({} if result is None else {"result": storable(result)})
    response = yield from send(Call("POST", f"approvals/{decision.id}/outcome", json=body), retry)
    return approval_of(response)


def extend(decision: Decision, seconds: int | None, *, retry: Retry) -> Flow[Decision]:
    """Move a pending approval's deadline later: once, by at most its agent's timeout."""
    body = {} if seconds is None else {"seconds": int(seconds)}
    return approval_of((yield from send(Call("POST", f"approvals/{decision.id}/extend", json=body), retry)))


def ask_again(decision: Decision, *, retry: Retry) -> Flow[Decision]:
    """A new pending approval for an expired one's call and version, linked to it."""
    return approval_of((yield from send(Call("POST", f"approvals/{decision.id}/ask-again", json={}), retry)))


def list_pending(*, thread: str | None, requester: str | None, agent: str | None, limit: int, retry: Retry) -> Flow[list[Decision]]:
    """The pending approvals the token's user may see, oldest first: of one `thread`, asked by one
    `requester` (a username), of one `agent` (AgentKit's `listPendingApprovals({threadId, userId})`)."""
    wanted = {"status": PENDING_STATUS, "thread": thread, "requester": requester, "agent": agent, "limit": max(1, min(500, int(limit)))}
    response = yield from send(Call("GET", "approvals", params={k: v for k, v in wanted.items() if v is not None}), retry)
    if not response.is_success:
        raise error_of(response)
    try:
        return [Decision.from_json(item) for item in response.json()["items"]]
    except (ValueError, KeyError, TypeError):
        raise HitlError(response.status_code, f"Not a list of approvals: {response.text[:200]!r}") from None


def storable(text: str) -> str:
    """`text` as the server stores it: no NUL, no lone surrogate, at most MAX_RESULT characters."""
    text = text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= MAX_RESULT else text[: MAX_RESULT - 1] + "…"


def approval_of(response: httpx.Response) -> Decision:
    """The approval a successful answer carries; an error answer raises HitlError with its detail."""
    if not response.is_success:
        raise error_of(response)
    try:
        return Decision.from_json(response.json())
    except ValueError:  # not JSON
        raise HitlError(response.status_code, f"Not JSON: {response.text[:200]!r}") from None
    except HitlError as error:
        raise HitlError(response.status_code, error.detail) from None


def error_of(response: httpx.Response) -> HitlError:
    try:
        body = response.json()
    except ValueError:
        return HitlError(response.status_code, response.text[:500] or response.reason_phrase)
    if not isinstance(body, dict):
        return HitlError(response.status_code, body)
    field = body.get("field")
    return HitlError(response.status_code, body.get("detail", body), field if isinstance(field, str) else None)
