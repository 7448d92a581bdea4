"""Emptying the test database between transactional tests, at a fraction of the cost of Django's
`flush` (which pytest-django calls after each one): ours deletes the rows of only the tables that
have any, in one transaction, and keeps the content types and permissions that `flush` deletes and
its post_migrate then makes again (with the audit's triggers) for every test. On PostgreSQL,
`flush` is a TRUNCATE of every table, whose cost grows with their number (about 120), not with the
rows: 0.2 s a test, 7 of the PostgreSQL unit run's minutes.

Same result: every row a test made is gone (foreign keys are checked at commit, so the order of the
deletes does not matter), decided approvals included (approvals.audit.triggers.erasing)."""
from django.db import connections
from django.test import TransactionTestCase

from approvals.audit.triggers import erasing

# Made once by migrate and its post_migrate, never by a test; what every test finds.
KEPT = {"django_migrations", "django_content_type", "auth_permission"}
_tables: dict[str, list[str]] = {}


def empty(using: str) -> None:
    connection = connections[using]
    if using not in _tables:
        names = connection.introspection.django_table_names(only_existing=True, include_views=False)
        _tables[using] = sorted(set(names) - KEPT)
    quote = connection.ops.quote_name
    with erasing(using), connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(f"SELECT '{t}' WHERE EXISTS (SELECT 1 FROM {quote(t)})" for t in _tables[using]))
        for (table,) in cursor.fetchall():
            cursor.execute(f"DELETE FROM {quote(table)}")


def _fixture_teardown(self) -> None:
    for using in self._databases_names(include_mirrors=False):
        empty(using)


def install() -> None:
    TransactionTestCase._fixture_teardown = _fixture_teardown
