"""The Approvers group, with the permission to decide other users' approvals.

(The trigger that keeps decided approvals final is installed after every migrate: see
approvals/audit/triggers.py.)"""
from django.db import migrations


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

    operations = [migrations.RunPython(create_approvers_group, remove_approvers_group)]
