from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from . import receivers, triggers
        from .signals import approval_claimed, approval_edited, approval_requested, approvals_decided

        post_migrate.connect(triggers.install_decided_is_final, sender=self, dispatch_uid="approvals.trigger")
        connection_created.connect(triggers.register_functions, dispatch_uid="approvals.sql_functions")
        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="approvals.on_requested")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="approvals.on_decided")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="approvals.on_edited")
        approval_claimed.connect(receivers.on_approval_claimed, dispatch_uid="approvals.on_claimed")
