from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    """MCP tool servers as a source of tools: discovered, gated and called like the built-in ones."""

    name = "toolservers"
    verbose_name = "Tool servers (MCP)"

    def ready(self) -> None:
        from approvals.cards import titles
        from chat.tools import registry

        from .specs import tools_for_agent
        from .titles import describe_call

        registry.add_source(tools_for_agent)
        titles.add_describer(describe_call)
