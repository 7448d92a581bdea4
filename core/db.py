"""Database connections for threads that wait, and database work for async code that waits."""
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from channels.db import DatabaseSyncToAsync
from django.db import connection

from core.live import use_own_loop_in_this_thread


def release_connection() -> None:
    """Give this thread's PostgreSQL connection back to the pool before a long wait (a model call,
    a tool run), so a worker whose hundred threads wait on a model holds a few connections, not a
    hundred; the next query takes one again. Inside a transaction nothing is released (and nothing
    should wait there). SQLite connections are files that hold no lock between statements: kept."""
    if connection.vendor == "postgresql" and connection.connection is not None and not connection.in_atomic_block:
        connection.close()


def thread_pool(name: str, size: int) -> Callable[[Callable], DatabaseSyncToAsync]:
    """`database(func)`: `func` as an awaitable run on `size` threads of `name`'s own, never on the
    one thread asgiref shares by default (`thread_sensitive=True`), which the websockets' handshakes
    also wait for: an async surface that waits (A2A, long polls, the MCP gateway) must not queue
    them behind it. Django's connections are per thread, so each thread has its own; channels'
    DatabaseSyncToAsync closes stale ones around every call, as for any request."""
    executor = ThreadPoolExecutor(max_workers=max(size, 1), thread_name_prefix=name, initializer=use_own_loop_in_this_thread)

    def database(func: Callable) -> DatabaseSyncToAsync:
        return DatabaseSyncToAsync(func, thread_sensitive=False, executor=executor)

    return database
