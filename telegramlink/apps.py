from django.apps import AppConfig


class TelegramLinkConfig(AppConfig):
    """Telegram as one more surface of the decision service: requests go to the phones of those who
    may decide them, a press decides, and every message follows the outcome however it was decided
    (its life is the deliveries base's: telegramlink.channel says how Telegram sends and edits)."""

    name = "telegramlink"
    verbose_name = "Telegram"

    def ready(self) -> None:
        from deliveries.channels import register as register_channel
        from profiles.sections import Section, register

        from .channel import CHANNEL
        from .views import profile_context

        register(Section("telegram", "Telegram", "telegramlink/profile_section.html", order=10, context=profile_context))
        register_channel(CHANNEL)
