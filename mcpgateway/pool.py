"""The gateway's database work, and the tools its approved calls run (a git commit, a web fetch:
seconds), on threads of its own (core.db.thread_pool says why)."""
from django.conf import settings

from core.db import thread_pool

database = thread_pool("mcp-db", settings.HITL_MCP_DB_THREADS)
