from django.apps import AppConfig


class TelegramLinkConfig(AppConfig):
    """Telegram as one more surface of the decision service: requests go to the phones of those who
    may decide them, a press decides, and every message follows the outcome however it was decided."""

    name = "telegramlink"
    verbose_name = "Telegram"

    def ready(self) -> None:
        from approvals.signals import approval_edited, approval_requested, approvals_decided

        from . import receivers

        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="telegramlink.on_requested")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="telegramlink.on_decided")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="telegramlink.on_edited")
