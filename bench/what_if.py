"""What-if experiments: a proposed app fix, applied only inside the bench's worker so that its
effect is measured beside the unchanged app in the same run (`python bench/run.py --what-if`).
Nothing here is loaded unless HITL_BENCH_WHAT_IF names it; the app itself is never changed.

Several can be combined, comma-separated: HITL_BENCH_WHAT_IF=persistent-push,quiet-litellm.

persistent-push
    hitl.live.push_now calls `async_to_sync(group_send)` from sync code. In a Celery worker there is
    no event loop, so every push starts a thread, makes an event loop, opens a new Redis
    connection (redis-py then looks its own version up with importlib.metadata), sends, and tears
    it all down. The fix: one event loop per process, in a daemon thread started on first use
    (again after a fork), to which each push is handed with run_coroutine_threadsafe; waiting for
    the result keeps the pushes of one conversation in order.

quiet-litellm
    After every streamed completion litellm hands "success logging" to a thread pool, which runs it
    with asyncio.run(), i.e. one more thread wake-up and one more event loop per model call, even
    with no callbacks configured. `litellm.disable_streaming_logging = True` skips it (the app
    configures no litellm callbacks, so nothing is lost).
"""
import asyncio
import os
import threading

_lock = threading.Lock()
_state: dict = {"pid": None, "loop": None}


def _loop() -> asyncio.AbstractEventLoop:
    with _lock:
        if _state["pid"] != os.getpid():  # first use, or a pool child forked from a parent that had one
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="hitl-push-loop", daemon=True).start()
            _state.update(pid=os.getpid(), loop=loop)
        return _state["loop"]


def persistent_push_now(group: str, html: str) -> None:
    from channels.layers import get_channel_layer

    coroutine = get_channel_layer().group_send(group, {"type": "html.push", "html": html})
    asyncio.run_coroutine_threadsafe(coroutine, _loop()).result(timeout=10)


def _quiet_litellm(**kwargs) -> None:
    from chat import llm

    llm.litellm_module().disable_streaming_logging = True  # in each pool child, like the app's warm-up


def install(names: str) -> None:
    for name in filter(None, names.split(",")):
        if name == "persistent-push":
            from hitl import live

            # live.push() looks push_now up at call time, and the loop and receivers call live.push_now.
            live.push_now = persistent_push_now
        elif name == "quiet-litellm":
            from celery.signals import worker_process_init

            worker_process_init.connect(_quiet_litellm, weak=False)
        else:
            raise ValueError(f"unknown what-if {name!r}")
