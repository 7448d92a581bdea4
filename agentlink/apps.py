from django.apps import AppConfig


class AgentLinkConfig(AppConfig):
    """Every agent as an A2A server: a run is a task, a pause is an input-required task that any A2A
    client can decide through the same decision service as the chat."""

    name = "agentlink"
    verbose_name = "A2A (agent to agent)"
