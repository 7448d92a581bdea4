from django.contrib import admin

from hitl.admin import ReadOnlyAdminMixin

from .models import Agent, ApiToken, Conversation, Message, OutboxEmail, ToolCall


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "model", "max_steps"]


class ReadOnlyAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    pass


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["id", "title", "owner", "agent", "status", "created_at"]
    list_filter = ["status", "agent"]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "position", "role", "created_at"]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["name", "status", "message", "created_at"]
    list_filter = ["status", "name"]


@admin.register(OutboxEmail)
class OutboxEmailAdmin(ReadOnlyAdmin):
    list_display = ["to", "subject", "conversation", "sent_at"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at", "last_used_at"]
    readonly_fields = ["key_hash"]
