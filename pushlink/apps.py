from django.apps import AppConfig


class PushLinkConfig(AppConfig):
    """Web Push as one more surface of the decision service: a request reaches the devices of those
    who may decide it as a notification whose actions carry single-use decision tokens, and every
    copy is replaced by the outcome however it was decided."""

    name = "pushlink"
    verbose_name = "Push notifications"

    def ready(self) -> None:
        from approvals.signals import (
            approval_edited, approval_extended, approval_requested, approvals_decided, approvals_escalated, approvals_expiring,
            approvals_reminded,
        )

        from profiles.sections import Section, register

        from . import receivers
        from .views import profile_context

        register(Section("push", "Notifications", "pushlink/profile_section.html", order=30, context=profile_context))

        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="pushlink.on_requested")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="pushlink.on_edited")
        approvals_escalated.connect(receivers.on_approvals_escalated, dispatch_uid="pushlink.on_escalated")
        approvals_reminded.connect(receivers.on_approvals_escalated, dispatch_uid="pushlink.on_reminded")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="pushlink.on_decided")
        approvals_expiring.connect(receivers.on_approvals_expiring, dispatch_uid="pushlink.on_expiring")
        approval_extended.connect(receivers.on_approval_extended, dispatch_uid="pushlink.on_extended")
