"""Database triggers that keep the audit: a decided approval is never changed (no column of it) nor
deleted, even by raw SQL, on SQLite and PostgreSQL; and `erasing()`, the one way to empty a
database that holds decisions.

Installed after every `migrate` (post_migrate), not by one migration: SQLite rebuilds a table when a
migration alters it, and a rebuild silently drops the table's triggers. `chat.triggers` protects
finished tool calls with the same `final_rows_sql()`.

Deleting is refused unless the connection is *erasing*. Emptying a database must stay possible: the
test suite flushes every table between transactional tests (`DELETE FROM` each table on SQLite,
`TRUNCATE` on PostgreSQL, which fires no row trigger), and this app's `flush` command is Django's
run inside `erasing()`. So:

- SQLite: the trigger asks the function `hitl_audit_erasing()`, which this app registers on each of
  Django's connections (`register_functions`), and which answers from a flag of the Python thread
  that only `erasing()` sets. SQL alone, even injected through the app's own connection, cannot set
  it; a connection that lacks the function (the `sqlite3` shell, another program) cannot delete
  from the table at all ("no such function"): the trigger fails closed.
- PostgreSQL: the trigger reads the setting `hitl.audit_erasing`, which `erasing()` sets for its
  transaction only. Any session may set it, so against someone who can run arbitrary SQL it is a
  speed bump, as the triggers themselves are against the tables' owner, who may drop them.

That is the limit of triggers: whoever owns the tables (or the SQLite file) can drop them, change a
row and make them again. The audit chain (`approvals.audit`) makes such a change evident.
"""
import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction

_erasing = contextvars.ContextVar("hitl_audit_erasing", default=False)

DECIDED = "OLD.status <> 'pending'"


def final_rows_sql(
    vendor: str, *, table: str, name: str, final: str, update_message: str, delete_message: str
) -> list[str]:
    """The statements that make rows of `table` matching `final` (an SQL condition on OLD) refuse
    every UPDATE, and every DELETE unless erasing. Dropped and made again each time, so that a
    database made by an older version gets the current triggers."""
    if vendor == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {name}_is_final;",
            f"""CREATE TRIGGER {name}_is_final BEFORE UPDATE ON {table} WHEN {final}
            BEGIN SELECT RAISE(ABORT, '{update_message}'); END;""",
            f"DROP TRIGGER IF EXISTS {name}_is_kept;",
            f"""CREATE TRIGGER {name}_is_kept BEFORE DELETE ON {table} WHEN {final} AND NOT hitl_audit_erasing()
            BEGIN SELECT RAISE(ABORT, '{delete_message}'); END;""",
        ]
    if vendor == "postgresql":
        return [
            f"""CREATE OR REPLACE FUNCTION {name}_refuse_change() RETURNS trigger AS $$
            BEGIN
              IF {final} THEN
                IF TG_OP = 'UPDATE' THEN
                  RAISE EXCEPTION '{update_message}' USING ERRCODE = 'integrity_constraint_violation';
                END IF;
                IF coalesce(current_setting('hitl.audit_erasing', true), '') <> 'on' THEN
                  RAISE EXCEPTION '{delete_message}' USING ERRCODE = 'integrity_constraint_violation';
                END IF;
              END IF;
              IF TG_OP = 'DELETE' THEN
                RETURN OLD;
              END IF;
              RETURN NEW;
            END;
            $$ LANGUAGE plpgsql;""",
            f"DROP TRIGGER IF EXISTS {name}_is_final ON {table};",
            f"""CREATE TRIGGER {name}_is_final BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {name}_refuse_change();""",
        ]
    return []


def install_decided_is_final(using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    install(
        using,
        table="approvals_approval",
        name="approvals_decided",
        final=DECIDED,
        update_message="a decided approval is final",
        delete_message="a decided approval is never deleted",
    )
    if connections[using].vendor == "postgresql":  # the function of the update-only trigger this replaced
        with connections[using].cursor() as cursor:
            cursor.execute("DROP FUNCTION IF EXISTS approvals_refuse_decided_change();")
    # A vote is final once cast; a delegation once ended early (until then, its end is written).
    install(
        using, table="approvals_vote", name="approvals_vote", final="OLD.id IS NOT NULL",
        update_message="a vote is final", delete_message="a vote is never deleted",
    )
    install(
        using, table="approvals_outcome", name="approvals_outcome", final="OLD.id IS NOT NULL",
        update_message="a reported outcome is final", delete_message="a reported outcome is never deleted",
    )
    install(
        using, table="approvals_policyversion", name="approvals_policyversion", final="OLD.id IS NOT NULL",
        update_message="a policy version is final", delete_message="a policy version is never deleted",
    )
    install(
        using, table="approvals_delegation", name="approvals_delegation", final="OLD.end_chain_position IS NOT NULL",
        update_message="an ended delegation is final", delete_message="a delegation is never deleted",
    )


def install(using: str, *, table: str, **sql) -> None:
    connection = connections[using]
    if table not in connection.introspection.table_names():
        return
    with connection.cursor() as cursor:
        for statement in final_rows_sql(connection.vendor, table=table, **sql):
            cursor.execute(statement)


def uninstall(connection, *, table: str, name: str) -> None:
    """Drop the triggers of `final_rows_sql` (a migration that must rewrite final rows; the next
    post_migrate makes them again)."""
    statements = {
        "sqlite": [f"DROP TRIGGER IF EXISTS {name}_is_final;", f"DROP TRIGGER IF EXISTS {name}_is_kept;"],
        "postgresql": [f"DROP TRIGGER IF EXISTS {name}_is_final ON {table};"],
    }
    with connection.cursor() as cursor:
        for statement in statements.get(connection.vendor, []):
            cursor.execute(statement)


def register_functions(sender, connection, **kwargs) -> None:
    """connection_created: give each SQLite connection the function the delete triggers ask."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("hitl_audit_erasing", 0, lambda: int(_erasing.get()))


@contextmanager
def erasing(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Let this thread delete decided approvals and finished tool calls, in one transaction: for
    emptying a database (the `flush` command, a test resetting its world), never for editing
    history. Deleting some decisions breaks the chain where they were (`verify_audit` says so),
    unless they were the newest: see `approvals.audit` on anchoring the head."""
    token = _erasing.set(True)
    try:
        with transaction.atomic(using=using):
            connection = connections[using]
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('hitl.audit_erasing', 'on', true)")  # this transaction only
            yield
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('hitl.audit_erasing', '', true)")  # and not after, if nested
    finally:
        _erasing.reset(token)
