"""The gateway's database work, and the tools its calls run, on threads of its own.

As agentlink.pool says for A2A: asgiref's default would queue this work on the one thread the
websocket consumers share, and a tool run by an approved call (a git commit, a web fetch) takes
seconds. Each thread has its own Django connection, closed when stale around every call."""
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from channels.db import DatabaseSyncToAsync
from django.conf import settings

EXECUTOR = ThreadPoolExecutor(max_workers=max(settings.HITL_MCP_DB_THREADS, 1), thread_name_prefix="mcp-db")


def database(func: Callable) -> DatabaseSyncToAsync:
    """`func` as an awaitable that runs on the gateway's threads."""
    return DatabaseSyncToAsync(func, thread_sensitive=False, executor=EXECUTOR)
