"""A2A's database work, on a few threads of its own.

asgiref's default (`thread_sensitive=True`) runs the sync calls of an async caller that has no
ThreadSensitiveContext on one process-wide thread, the one the websocket consumers' database work
(their login and the dashboard's reads) shares too: one token holder's slow ListTasks queued every
socket's handshake behind it. asgiref's way out is an executor with `thread_sensitive=False`.
Django's connections are per thread, so each of these threads has its own; channels'
DatabaseSyncToAsync closes stale ones around every call, as for any request."""
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from channels.db import DatabaseSyncToAsync
from django.conf import settings

EXECUTOR = ThreadPoolExecutor(max_workers=max(settings.HITL_A2A_DB_THREADS, 1), thread_name_prefix="a2a-db")


def database(func: Callable) -> DatabaseSyncToAsync:
    """`func` as an awaitable that runs on A2A's threads, never on the sockets' shared one."""
    return DatabaseSyncToAsync(func, thread_sensitive=False, executor=EXECUTOR)
