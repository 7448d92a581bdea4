"""Tool servers are managed here only: a stdio server is a command this host runs, so it is never
set from a chat, the API or the model."""
from django.contrib import admin, messages

from . import client, discovery
from .models import AgentToolServer, ToolServer


class AgentLinkInline(admin.TabularInline):
    model = AgentToolServer
    extra = 0
    fields = ["agent", "tools", "require_approval", "risks"]


@admin.register(ToolServer)
class ToolServerAdmin(admin.ModelAdmin):
    list_display = ["name", "transport", "enabled", "tool_count", "refreshed_at", "refresh_error"]
    readonly_fields = ["tool_list", "refreshed_at", "refresh_error"]
    inlines = [AgentLinkInline]
    actions = ["refresh_tools"]

    @admin.display(description="tools")
    def tool_count(self, server: ToolServer) -> int:
        return len(server.tools)

    @admin.display(description="tools as last listed")
    def tool_list(self, server: ToolServer) -> str:
        return ", ".join(tool["name"] for tool in server.tools) or "(none listed yet: use the action “Refresh the tool lists”)"

    @admin.action(description="Refresh the tool lists")
    def refresh_tools(self, request, queryset):
        for server in queryset:
            try:
                tools = discovery.refresh(server)
            except client.ServerUnavailable as exc:
                self.message_user(request, f"{server.name}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{server.name}: {len(tools)} tools.", messages.SUCCESS)


@admin.register(AgentToolServer)
class AgentToolServerAdmin(admin.ModelAdmin):
    list_display = ["agent", "server", "tools", "require_approval"]
    list_filter = ["agent", "server"]
