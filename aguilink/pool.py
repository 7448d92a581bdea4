"""AG-UI's database work, on a few threads of its own (hitl.db.thread_pool says why): a run that
follows a long turn must never queue the websockets' handshakes behind it."""
from hitl.db import thread_pool

DB_THREADS = 4

database = thread_pool("agui-db", DB_THREADS)
