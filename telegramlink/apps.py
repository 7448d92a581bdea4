from django.apps import AppConfig


class TelegramLinkConfig(AppConfig):
    """Telegram as one more surface of the decision service: requests go to the phones of those who
    may decide them, a press decides, and every message follows the outcome however it was decided."""

    name = "telegramlink"
    verbose_name = "Telegram"

    def ready(self) -> None:
        from approvals.signals import (
            approval_edited, approval_extended, approval_requested, approval_voted, approvals_decided, approvals_escalated,
            approvals_expiring, approvals_reminded,
        )

        from profiles.sections import Section, register

        from . import receivers
        from .views import profile_context

        register(Section("telegram", "Telegram", "telegramlink/profile_section.html", order=10, context=profile_context))

        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="telegramlink.on_requested")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="telegramlink.on_decided")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="telegramlink.on_edited")
        approval_voted.connect(receivers.on_approval_voted, dispatch_uid="telegramlink.on_voted")
        approvals_reminded.connect(receivers.on_approvals_reminded, dispatch_uid="telegramlink.on_reminded")
        approvals_escalated.connect(receivers.on_approvals_escalated, dispatch_uid="telegramlink.on_escalated")
        approvals_expiring.connect(receivers.on_approvals_expiring, dispatch_uid="telegramlink.on_expiring")
        approval_extended.connect(receivers.on_approval_extended, dispatch_uid="telegramlink.on_extended")
