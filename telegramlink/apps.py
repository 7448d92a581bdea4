from django.apps import AppConfig

from chat.signals import run_settled


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
        run_settled.connect(relay_answer, dispatch_uid="telegramlink.relay_answer")


def relay_answer(sender, conversation, **kwargs) -> None:
    """A run of a conversation written from Telegram ended: its answer goes back there (tasks.relay_answer)."""
    from hitl.celery import enqueue_on_commit

    from .tasks import relay_answer as task
    from .updates import CHAT

    if conversation.relay_to == CHAT:
        enqueue_on_commit(task, str(conversation.pk))
