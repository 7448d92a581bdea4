from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from . import receivers
        from .signals import approval_decided, approval_requested

        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="approvals.on_requested")
        approval_decided.connect(receivers.on_approval_decided, dispatch_uid="approvals.on_decided")
