"""AG-UI's database work, on a few threads of its own (core.db.thread_pool says why): a run that
follows a long turn must never queue the websockets' handshakes behind it."""
from django.conf import settings

from core.db import thread_pool

database = thread_pool("agui-db", settings.HITL_AGUI_DB_THREADS)
