from django.apps import AppConfig


class AgentLinkConfig(AppConfig):
    """Every agent as an A2A server: a run is a task, a pause is an input-required task that any A2A
    client can decide through the same decision service as the chat."""

    name = "agentlink"
    verbose_name = "A2A (agent to agent)"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from chat.models import Message

        from .receivers import on_message_saved

        post_save.connect(on_message_saved, sender=Message, dispatch_uid="agentlink.on_message_saved")

        from chat.tools import registry

        from .remote import tools_for_agent

        registry.add_source(tools_for_agent)  # remote A2A agents as tools (<name>__ask)
