from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group
        from django.contrib.auth.signals import user_logged_out
        from django.db.models.signals import m2m_changed, post_delete, post_save

        from . import access

        User = get_user_model()
        user_logged_out.connect(access.on_logged_out, dispatch_uid="core.access.logged_out")
        post_save.connect(access.on_user_saved, sender=User, dispatch_uid="core.access.user_saved")
        post_delete.connect(access.on_user_saved, sender=User, dispatch_uid="core.access.user_deleted")
        for through in (User.groups.through, User.user_permissions.through):
            m2m_changed.connect(access.on_user_access_changed, sender=through, dispatch_uid=f"core.access.{through.__name__}")
        m2m_changed.connect(
            access.on_group_permissions_changed, sender=Group.permissions.through, dispatch_uid="core.access.group_perms"
        )
