"""Database connections for threads that wait."""
from django.db import connection


def release_connection() -> None:
    """Give this thread's PostgreSQL connection back to the pool before a long wait (a model call,
    a tool run), so a worker whose hundred threads wait on a model holds a few connections, not a
    hundred; the next query takes one again. Inside a transaction nothing is released (and nothing
    should wait there). SQLite connections are files that hold no lock between statements: kept."""
    if connection.vendor == "postgresql" and connection.connection is not None and not connection.in_atomic_block:
        connection.close()
