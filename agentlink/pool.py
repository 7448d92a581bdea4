"""A2A's database work, on a few threads of its own (core.db.thread_pool says why): one token
holder's slow ListTasks must never queue every socket's handshake behind it."""
from django.conf import settings

from core.db import thread_pool

database = thread_pool("a2a-db", settings.HITL_A2A_DB_THREADS)
