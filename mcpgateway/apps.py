from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    """Every agent as an MCP server (streamable HTTP at /mcp/<slug>/): its tools listed, each call
    through the agent's gate, rules and routes, a gated one answered once a human decided. Not named
    `mcp`: that is the SDK it is built with."""

    name = "mcpgateway"
    verbose_name = "MCP gateway"
