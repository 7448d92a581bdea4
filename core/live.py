"""The one way sync code pushes rendered HTML to browsers: an `html.push` event to a group."""
import asyncio
import logging
import os
import threading
from collections.abc import Callable
from contextlib import contextmanager

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

APPROVALS_GROUP = "approvals"
PUSH_TIMEOUT_SECONDS = 10


def conversation_group(conversation_id) -> str:
    return f"conversation.{conversation_id}"


class _OwnLoop:
    """An event loop of this process (and thread), kept between pushes and run only while one is sent.

    Without it every push from a Celery worker would make `async_to_sync` start a thread and an
    event loop, and channels-redis open (and close) a Redis connection, each time. A loop in a
    thread of its own costs a GIL hand-over each way instead, measured at a fifth of a worker's
    time; run here, in the calling thread, the push costs the send and nothing more. In daphne only
    the database threads of core.db.thread_pool use it (see use_own_loop_in_this_thread); a
    request's sync code hands the send to the server's own loop through `async_to_sync`."""

    def __init__(self):
        self._local = threading.local()

    def run(self, coroutine) -> None:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():  # first use, or a child forked from a process that had one
            local.loop, local.pid = asyncio.new_event_loop(), os.getpid()
        local.loop.run_until_complete(asyncio.wait_for(coroutine, PUSH_TIMEOUT_SECONDS))


_own_loop: _OwnLoop | None = None


def use_own_loop() -> None:
    """Called in each Celery worker process: from now on this process pushes through a long-lived loop."""
    global _own_loop
    _own_loop = _OwnLoop()


_threads_loops = _OwnLoop()  # one loop per thread that pushes on its own in a web process
_pushes_on_own_loop = threading.local()


def use_own_loop_in_this_thread() -> None:
    """Called as each thread of core.db.thread_pool starts (A2A's, AG-UI's, the MCP gateway's database
    work in daphne): it pushes through a loop of its own. Through `async_to_sync` its push would run
    on the server's loop, which a shutdown stops: a push caught there waits for ever, and the process,
    which joins these threads as it exits, never ends (a restart waited for SIGKILL)."""
    _pushes_on_own_loop.on = True


def push_now(group: str, html: str) -> None:
    """Send at once (or, while this thread holds pushes together, at its next flush). Best effort,
    like every push: the database holds the truth and a page re-reads it when its socket
    reconnects, so a push that fails twice (Redis down) is logged and dropped rather than failing
    the agent's step. The second try is for a pooled connection that died with a Redis restart: it
    is made anew."""
    held = getattr(_held, "frames", None)
    if held is not None:
        held.setdefault(group, []).append(html)
        return
    send_now(group, {"type": "html.push", "html": html})


_held = threading.local()


@contextmanager
def held_together():
    """Hold this thread's pushes meanwhile and send them, in order, as one frame per group at each
    flush() and at the end: pushes milliseconds apart (one card finished, the next one claimed)
    reach a page as one frame, which shows what they would have shown. The caller flushes before
    anything that may take a while, so nothing waits on it."""
    _held.frames = {}
    try:
        yield
    finally:
        flush()
        _held.frames = None


def flush() -> None:
    """Send what this thread holds (see held_together)."""
    frames = getattr(_held, "frames", None)
    if not frames:
        return
    _held.frames = {}
    for group, parts in frames.items():
        send_now(group, {"type": "html.push", "html": "".join(parts)})


_quiet = threading.local()


@contextmanager
def pushes_off():
    """No pushes in this thread meanwhile: for a command that runs before any page can be open (the
    demo setup that `make run` does before it starts Redis), which has no one to tell and would only
    log each push as lost."""
    _quiet.on = True
    try:
        yield
    finally:
        _quiet.on = False


def send_now(group: str, event: dict) -> None:
    """Send any event to a group at once, best effort like every push (see push_now)."""
    if getattr(_quiet, "on", False):
        return
    for attempt in (1, 2):
        try:
            _send(group, event)
            return
        except Exception as exc:
            if attempt == 2:
                logger.warning("push to %s lost: %s: %s", group, exc.__class__.__name__, exc)


def _send(group: str, message: dict) -> None:
    send = get_channel_layer().group_send
    loop = _own_loop or (_threads_loops if getattr(_pushes_on_own_loop, "on", False) else None)
    if loop is None:
        async_to_sync(send)(group, message)
    else:
        loop.run(send(group, message))


def push(group: str, render: str | Callable[[], str]) -> None:
    """Send after the current transaction commits, so a tab never shows what the database lacks.
    `render` is the HTML, or a function that renders it then (outside the transaction, which on
    SQLite holds the one write lock). A push that fails is logged and lost: pages re-read the
    database when their socket reconnects."""
    transaction.on_commit(lambda: push_now(group, render() if callable(render) else render), robust=True)


class Listening:
    """Follow a group's pushes from async code that waits for the database to change (A2A's
    blocking sends and streams, the API's long polls, the MCP gateway's gated calls): `wait(s)`
    returns when a push arrives or after `s` seconds, whichever is first. Pushes are best effort,
    so the caller reads the rows again after every wait; without a channel layer (Redis down) it
    simply sleeps, and the rows are read every `s` seconds still.

        async with Listening(conversation_group(pk)) as listening:
            while still_waiting():
                await listening.wait(1.0)
    """

    def __init__(self, group: str):
        self.group, self.layer, self.channel = group, get_channel_layer(), None

    async def __aenter__(self) -> "Listening":
        if self.layer is not None:
            try:
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(self.group, self.channel)
            except Exception as exc:  # noqa: BLE001  (Redis down: the rows are read every wait instead)
                logger.warning("no channel layer to follow %s: %s", self.group, exc)
                self.channel = None
        return self

    async def wait(self, seconds: float) -> None:
        seconds = max(seconds, 0.01)
        if self.channel is None:
            await asyncio.sleep(seconds)
            return
        try:
            await asyncio.wait_for(self.layer.receive(self.channel), timeout=seconds)
        except asyncio.TimeoutError:
            pass
        except Exception:  # noqa: BLE001  (the layer lost Redis: keep reading the rows)
            await asyncio.sleep(seconds)

    async def __aexit__(self, *exc_info) -> None:
        if self.channel is None:
            return
        # A client that leaves cancels the waiting task (and, under anyio, every await it makes
        # after): the discard runs as a task of its own, so Redis's group entry goes now rather
        # than when it expires a day later.
        discard = asyncio.ensure_future(asyncio.wait_for(self.layer.group_discard(self.group, self.channel), timeout=5))
        _discarding.add(discard)
        discard.add_done_callback(_discarded)
        try:
            await asyncio.shield(discard)
        except asyncio.CancelledError:
            raise  # the discard goes on by itself
        except Exception:  # noqa: BLE001  (the group's entry expires on its own)
            pass


_discarding: set = set()  # the running discards, held so that none is collected before it is done


def _discarded(task: "asyncio.Future") -> None:
    _discarding.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: a failed discard is no error to log (the entry expires on its own)
