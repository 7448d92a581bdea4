"""Django's SQLite backend, with writers queued in the kernel instead of polling for the lock.

SQLite lets one connection write at a time. One that finds the lock taken sleeps and tries again
(sqlite3's busy handler: 1, 2, 5, ... then 100 ms between tries), so with a hundred worker threads
and daphne writing at once most of the time goes to sleeping while the lock is free, and an
unlucky writer gives up after the timeout ("database is locked"). Here every write first takes an
exclusive `flock` on a file beside the database: waiters block in the kernel (the GIL released) and
the next one goes as soon as the lock is let go, across the threads and processes of the app.

A transaction (`atomic`, which begins IMMEDIATE) holds the file lock from its BEGIN to its COMMIT
or ROLLBACK; a write outside a transaction holds it for its one statement; reads never take it
(WAL: they never wait for a writer). A process that dies lets go of its locks with its files."""
import fcntl
import os
from contextlib import contextmanager

from django.db.backends.sqlite3 import base

READS = ("SELECT", "PRAGMA", "EXPLAIN", "WITH")


class DatabaseWrapper(base.DatabaseWrapper):
    _write_lock_fd: int | None = None
    _write_lock_depth = 0

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        if not self.is_in_memory_db():
            self._write_lock_fd = os.open(f"{self.settings_dict['NAME']}.write-lock", os.O_RDWR | os.O_CREAT, 0o600)
        return connection

    def create_cursor(self, name=None):
        cursor = self.connection.cursor(factory=QueuedWriteCursor)
        cursor.wrapper = self
        return cursor

    @contextmanager
    def write_lock(self):
        """Hold the database's write lock (re-entrant: a BEGIN run inside its own lock nests)."""
        self._acquire_write_lock()
        try:
            yield
        finally:
            self._release_write_lock()

    def _acquire_write_lock(self) -> None:
        if self._write_lock_fd is not None and self._write_lock_depth == 0:
            fcntl.flock(self._write_lock_fd, fcntl.LOCK_EX)
        self._write_lock_depth += 1

    def _release_write_lock(self) -> None:
        self._write_lock_depth = max(self._write_lock_depth - 1, 0)
        if self._write_lock_fd is not None and self._write_lock_depth == 0:
            fcntl.flock(self._write_lock_fd, fcntl.LOCK_UN)

    def _release_all(self) -> None:
        if self._write_lock_depth:
            self._write_lock_depth = 1
            self._release_write_lock()

    def _start_transaction_under_autocommit(self):
        self._acquire_write_lock()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_all()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            if not (self.connection is not None and self.connection.in_transaction):
                self._release_all()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_all()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._release_all()
            if self._write_lock_fd is not None:
                os.close(self._write_lock_fd)
                self._write_lock_fd = None


class QueuedWriteCursor(base.SQLiteCursorWrapper):
    """A statement that writes outside a transaction waits for the write lock, like a BEGIN."""

    wrapper: DatabaseWrapper

    def execute(self, query, params=None):
        if self.connection.in_transaction or query.lstrip(" \n\t(").upper().startswith(READS):
            return super().execute(query, params)
        with self.wrapper.write_lock():
            return super().execute(query, params)

    def executemany(self, query, param_list):
        if self.connection.in_transaction:
            return super().executemany(query, param_list)
        with self.wrapper.write_lock():
            return super().executemany(query, param_list)
