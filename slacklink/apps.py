from django.apps import AppConfig


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
