from django.apps import AppConfig

from chat.signals import run_settled


class SlackLinkConfig(AppConfig):
    """Slack as one more surface of the decision service: requests go as Block Kit messages to
    those who may decide them, a press decides through approvals.services, and every message
    follows the outcome however it was decided (the life of each is the deliveries base's)."""

    name = "slacklink"
    verbose_name = "Slack"

    def ready(self) -> None:
        from deliveries.channels import register as register_channel
        from profiles.sections import Section, register

        from .channel import CHANNEL
        from .views import profile_context

        register(Section("slack", "Slack", "slacklink/profile_section.html", order=20, context=profile_context))
        register_channel(CHANNEL)
        run_settled.connect(relay_answer, dispatch_uid="slacklink.relay_answer")


def relay_answer(sender, conversation, **kwargs) -> None:
    """A run of a conversation written from Slack ended: its answer goes back there (tasks.relay_answer)."""
    from hitl.celery import enqueue_on_commit

    from .events import CHAT
    from .tasks import relay_answer as task

    if conversation.relay_to == CHAT:
        enqueue_on_commit(task, str(conversation.pk))
