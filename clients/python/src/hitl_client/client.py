"""`Client` and `AsyncClient`: the same methods over the same flows (`hitl_client.flows`), one
driven with blocking I/O, the other with await."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Mapping
from typing import Any, Generic, TypeVar

import httpx

from . import flows
from .decision import Decision
from .flows import Call, Flow, Pause, Retry

__version__ = "0.1.0"
R = TypeVar("R", Decision, Awaitable[Decision])


def api_url(base_url: str) -> str:
    """The API's root under the site's address (`http://host:8000` or `http://host:8000/api`)."""
    root = base_url.rstrip("/")
    return (root if root.endswith("/api") else f"{root}/api") + "/"


class _Methods(Generic[R]):
    """Every method, written once: each builds a flow and hands it to `_run`, which the sync client
    runs to a Decision and the async one to an awaitable of it."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 10.0, poll: int = flows.MAX_WAIT, retry: Retry | None = None
    ):
        self.base_url = api_url(base_url)
        self.headers = {"Authorization": f"Bearer {token}", "User-Agent": f"hitl-client/{__version__}"}
        self.timeout = timeout
        self.poll = poll
        self.retry = retry or Retry()

    def request_approval(
        self,
        agent: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        reason: str | None = None,
        risk: str | None = None,
        preview: Mapping[str, str] | None = None,
        thread: str | None = None,
        expires_in: int | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> R:
        """Ask whether `agent` may run `tool` with `arguments`. With `wait`, return once decided (or
        after `timeout` seconds, still pending); the decision's `arguments` are what to run: a human
        may have edited them. `preview` is `{"kind": "text"|"diff"|..., "text": ...}`; requests of
        one `thread` land in one conversation. `expires_in`: how many seconds the approval may wait
        for a human (the agent's own timeout caps it); then it expires, and the caller is told."""
        body = flows.approval_request(agent, tool, arguments, reason=reason, risk=risk, preview=preview, thread=thread, expires_in=expires_in)
        return self._run(flows.request_approval(body, wait=wait, timeout=timeout, retry=self.retry, poll=self.poll))

    def wait(self, decision: Decision, *, timeout: float | None = None) -> R:
        """Wait for a pending approval (say, one asked with `wait=False`) until decided or `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._run(flows.wait_for(decision, deadline=deadline, retry=self.retry, poll=self.poll))

    def get_approval(self, approval_id: int, wait: int = 0) -> R:
        """The approval as it stands; with `wait` (seconds, at most 60), as soon as it is decided."""
        return self._run(flows.get_approval(approval_id, wait=wait, retry=self.retry))

    def report_outcome(self, approval: Decision, status: str, result: str | None = None) -> R:
        """Say what happened when the approved call ran (`succeeded` or `failed`, with its text): once."""
        return self._run(flows.report_outcome(approval, status, result, retry=self.retry))

    def extend(self, approval: Decision, seconds: int | None = None) -> R:
        """Give a pending approval more time (once; by `seconds`, at most its agent's timeout, which
        is also the default): the returned approval's `raw["expires_at"]` is the new deadline.
        A second extend, or one of a decided approval, raises HitlError (409)."""
        return self._run(flows.extend(approval, seconds, retry=self.retry))

    def ask_again(self, approval: Decision) -> R:
        """Ask again for an expired approval: a new pending approval for the same call and version
        (its `raw["asked_again_from"]` is the old id). One that did not expire raises HitlError (409)."""
        return self._run(flows.ask_again(approval, retry=self.retry))

    def list_pending(
        self, *, thread: str | None = None, requester: str | None = None, agent: str | None = None, limit: int = 100
    ) -> Any:
        """The pending approvals your token may see, oldest first (a list of Decision): of one
        `thread` (as requested with it), asked by one `requester` (a username), of one `agent`."""
        return self._run(flows.list_pending(thread=thread, requester=requester, agent=agent, limit=limit, retry=self.retry))

    def _run(self, flow: Flow[Decision]) -> R:
        raise NotImplementedError

    def _request(self, call: Call) -> dict[str, Any]:
        """httpx's arguments for a call: a long poll may take its hold on top of the usual timeout."""
        return {
            "method": call.method,
            "url": call.path,
            "json": call.json,
            "params": call.params,
            "timeout": httpx.Timeout(self.timeout, read=self.timeout + call.holds),
        }


class Client(_Methods[Decision]):
    """Blocking client: `Client("http://localhost:8000", token)`; close it, or use it as a context
    manager. `timeout`: seconds for a request (a long poll gets its hold on top); `poll`: the longest
    one wait request lasts (at most 60; lower it behind a proxy that drops idle requests sooner);
    `retry`: how passing failures are retried."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 10.0, poll: int = flows.MAX_WAIT,
        retry: Retry | None = None, transport: httpx.BaseTransport | None = None,
    ):
        super().__init__(base_url, token, timeout=timeout, poll=poll, retry=retry)
        self.http = httpx.Client(base_url=self.base_url, headers=self.headers, transport=transport)

    def _run(self, flow: Flow[Decision]) -> Decision:
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                step = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration as done:
                decision: Decision = done.value
                return decision
            reply, error = None, None
            if isinstance(step, Pause):
                time.sleep(step.seconds)
                continue
            try:
                reply = self.http.request(**self._request(step))
            except httpx.TransportError as failure:
                error = failure

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Methods[Awaitable[Decision]]):
    """The same methods as `Client`, each awaited. Close it with `await client.aclose()` or `async with`."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 10.0, poll: int = flows.MAX_WAIT,
        retry: Retry | None = None, transport: httpx.AsyncBaseTransport | None = None,
    ):
        super().__init__(base_url, token, timeout=timeout, poll=poll, retry=retry)
        self.http = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, transport=transport)

    async def _run(self, flow: Flow[Decision]) -> Decision:
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                step = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration as done:
                decision: Decision = done.value
                return decision
            reply, error = None, None
            if isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
                continue
            try:
                reply = await self.http.request(**self._request(step))
            except httpx.TransportError as failure:
                error = failure

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
