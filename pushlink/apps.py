from django.apps import AppConfig


class PushLinkConfig(AppConfig):
    """Web Push as one more surface of the decision service: a request reaches the devices of those
    who may decide it as a notification whose actions carry single-use decision tokens, and every
    copy is replaced by the outcome however it was decided."""

    name = "pushlink"
    verbose_name = "Push notifications"

    def ready(self) -> None:
        from deliveries.channels import register as register_channel
        from profiles.sections import Section, register

        from .channel import CHANNEL
        from .views import profile_context

        register(Section("push", "Notifications", "pushlink/profile_section.html", order=30, context=profile_context))
        register_channel(CHANNEL)
