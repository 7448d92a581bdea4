"""The Approvers group, and a database trigger that refuses to change a decided approval's decision
fields, so the audit record holds even against raw SQL (SQLite and PostgreSQL)."""
from django.db import migrations

DECISION_COLUMNS = "status, decided_at, decided_by_id, decided_via, rejection_reason, arguments_hash, tool_call_id"
MESSAGE = "a decided approval is final"

SQLITE_UP = f"""
CREATE TRIGGER approvals_decided_is_final
BEFORE UPDATE OF {DECISION_COLUMNS} ON approvals_approval
WHEN OLD.status != 'pending'
BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;
"""
SQLITE_DOWN = "DROP TRIGGER IF EXISTS approvals_decided_is_final;"

POSTGRES_UP = f"""
CREATE OR REPLACE FUNCTION approvals_refuse_decided_change() RETURNS trigger AS $$
BEGIN
  IF OLD.status <> 'pending' THEN
    RAISE EXCEPTION '{MESSAGE}' USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER approvals_decided_is_final
BEFORE UPDATE OF {DECISION_COLUMNS} ON approvals_approval
FOR EACH ROW EXECUTE FUNCTION approvals_refuse_decided_change();
"""
POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS approvals_decided_is_final ON approvals_approval;
DROP FUNCTION IF EXISTS approvals_refuse_decided_change();
"""


def add_trigger(apps, schema_editor):
    sql = {"sqlite": SQLITE_UP, "postgresql": POSTGRES_UP}.get(schema_editor.connection.vendor)
    if sql:
        schema_editor.execute(sql)


def drop_trigger(apps, schema_editor):
    sql = {"sqlite": SQLITE_DOWN, "postgresql": POSTGRES_DOWN}.get(schema_editor.connection.vendor)
    if sql:
        schema_editor.execute(sql)


def create_approvers_group(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; this one is needed now.
    app_config = apps.get_app_config("approvals")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="Approvers")
    group.permissions.add(Permission.objects.get(codename="decide_approval", content_type__app_label="approvals"))


def remove_approvers_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="Approvers").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0002_approvers_expiry_webhooks"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunPython(create_approvers_group, remove_approvers_group),
        migrations.RunPython(add_trigger, drop_trigger),
    ]
