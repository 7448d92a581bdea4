from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from . import receivers
        from .audit import triggers
        from .policy import versions as policy_versions  # noqa: F401 (policy_versions: its receiver)
        from .signals import (
            approval_claimed, approval_edited, approval_requested, approval_voted, approvals_decided,
            approvals_escalated, approvals_reminded,
        )

        post_migrate.connect(triggers.install_decided_is_final, sender=self, dispatch_uid="approvals.trigger")
        connection_created.connect(triggers.register_functions, dispatch_uid="approvals.sql_functions")
        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="approvals.on_requested")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="approvals.on_decided")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="approvals.on_edited")
        approval_claimed.connect(receivers.on_approval_claimed, dispatch_uid="approvals.on_claimed")
        approval_voted.connect(receivers.on_approval_voted, dispatch_uid="approvals.on_voted")
        approvals_reminded.connect(receivers.on_approvals_reminded, dispatch_uid="approvals.on_reminded")
        approvals_escalated.connect(receivers.on_approvals_escalated, dispatch_uid="approvals.on_escalated")
