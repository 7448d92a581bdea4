"""A database trigger that refuses to change a decided approval's decision fields, so the audit
record holds even against raw SQL (SQLite and PostgreSQL).

Installed after every `migrate` (post_migrate), not by one migration: SQLite rebuilds a table when a
migration alters it, and a rebuild silently drops the table's triggers.
"""
from django.db import connections

DECISION_COLUMNS = "status, decided_at, decided_by_id, decided_via, rejection_reason, arguments_hash, tool_call_id"
MESSAGE = "a decided approval is final"

SQL = {
    "sqlite": [
        f"""CREATE TRIGGER IF NOT EXISTS approvals_decided_is_final
        BEFORE UPDATE OF {DECISION_COLUMNS} ON approvals_approval
        WHEN OLD.status != 'pending'
        BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    ],
    "postgresql": [
        f"""CREATE OR REPLACE FUNCTION approvals_refuse_decided_change() RETURNS trigger AS $$
        BEGIN
          IF OLD.status <> 'pending' THEN
            RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
          END IF;
          RETURN NEW;
        END;
        $$ LANGUAGE plpgsql;""",
        "DROP TRIGGER IF EXISTS approvals_decided_is_final ON approvals_approval;",
        f"""CREATE TRIGGER approvals_decided_is_final
        BEFORE UPDATE OF {DECISION_COLUMNS} ON approvals_approval
        FOR EACH ROW EXECUTE FUNCTION approvals_refuse_decided_change();""",
    ],
}


def install_decided_is_final(using: str = "default", **kwargs) -> None:
    connection = connections[using]
    if "approvals_approval" not in connection.introspection.table_names():
        return
    with connection.cursor() as cursor:
        for statement in SQL.get(connection.vendor, []):
            cursor.execute(statement)
