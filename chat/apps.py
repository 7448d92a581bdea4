from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from approvals import services
        from approvals.policy import calls
        from approvals.signals import (
            approval_edited, approval_extended, approval_reviewed, approvals_decided, approval_stored, approvals_expiring,
        )

        from . import asking_again, demo_tools, human_tools, llm, receivers, triggers  # noqa: F401  (register tools and the provider)
        from .gating import EditChecker

        calls.register_checker(EditChecker())
        services.register_asker(asking_again.ask_again)
        approvals_expiring.connect(receivers.on_approvals_expiring, dispatch_uid="chat.on_approvals_expiring")
        approval_extended.connect(receivers.on_approval_extended, dispatch_uid="chat.on_approval_extended")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="chat.on_approvals_decided")
        approval_stored.connect(receivers.on_approval_stored, dispatch_uid="chat.on_approval_stored")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="chat.on_approval_edited")
        approval_reviewed.connect(receivers.on_approval_reviewed, dispatch_uid="chat.on_approval_reviewed")
        post_migrate.connect(triggers.install_finished_is_final, sender=self, dispatch_uid="chat.trigger")
