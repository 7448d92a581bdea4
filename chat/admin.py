"""The audit admin for chat: agents are editable; conversations, messages and tool calls are records."""
from django import forms
from django.contrib import admin
from django.utils.html import format_html, format_html_join

from approvals.policy.admin import PolicyHistoryAdmin
from core.admin import ReadOnlyAdminMixin

from .models import Agent, ApiToken, Conversation, Message, OutboxEmail, ToolCall


class AgentForm(forms.ModelForm):
    """The agent's settings; its always-ask patterns checked for shape (approvals.policy.rules.always_asked)."""

    class Meta:
        model = Agent
        fields = "__all__"

    def clean_always_ask(self) -> dict:
        patterns = self.cleaned_data.get("always_ask") or {}
        shape = 'Write {"tool name or glob": ["pattern", ...]}, e.g. {"run_command": ["rm -rf *", "sudo *"]}.'
        if not isinstance(patterns, dict):
            raise forms.ValidationError(shape)
        for tool, globs in patterns.items():
            if not tool.strip() or not isinstance(globs, list) or not all(isinstance(g, str) and g.strip() and len(g) <= 200 for g in globs):
                raise forms.ValidationError(f"{shape} Each pattern is text of 1 to 200 characters.")
        return patterns


@admin.register(Agent)
class AgentAdmin(PolicyHistoryAdmin):
    form = AgentForm
    list_display = ["slug", "name", "model", "open_to_everyone", "owner_max_risk", "approval_timeout_seconds", "approval_valid_seconds", "max_steps"]
    list_filter = ["open_to_everyone"]
    filter_horizontal = ["allowed_users", "allowed_groups"]


class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    fields = ["position", "role", "content", "author", "in_model_context", "created_at"]
    readonly_fields = fields
    extra = 0


class ToolCallInline(ReadOnlyAdminMixin, admin.TabularInline):
    """Tool calls of the conversation, shown through their assistant messages."""

    model = ToolCall
    fk_name = "message"
    fields = ["call_id", "name", "arguments", "status", "result", "error", "started_at", "finished_at"]
    readonly_fields = fields
    extra = 0


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "title", "owner", "agent", "source", "status", "created_at", "updated_at"]
    list_filter = ["source", "status", "agent", "created_at"]  # source: chats, approval requests (api), MCP sessions
    search_fields = ["=id", "title", "owner__username", "=external_thread"]
    list_select_related = ["owner", "agent"]
    inlines = [MessageInline]
    readonly_fields = ["tool_calls"]

    @admin.display(description="tool calls")
    def tool_calls(self, conversation: Conversation) -> str:
        calls = ToolCall.objects.filter(message__conversation=conversation).select_related("approval__decided_by")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            (
                (c.call_id, c.name, c.arguments, c.status, _decision(c))
                for c in calls
            ),
        )
        return format_html("<table><tr><th>call</th><th>tool</th><th>arguments</th><th>status</th><th>decision</th></tr>{}</table>", rows)


def _decision(call: ToolCall) -> str:
    if not call.is_gated:
        return "not gated"
    approval = call.approval
    who = approval.decided_by.get_username() if approval.decided_by else "system"
    return approval.status if approval.status == "pending" else f"{approval.status} by {who} via {approval.decided_via}"


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["conversation", "position", "role", "created_at"]
    search_fields = ["content", "=conversation__id"]
    inlines = [ToolCallInline]


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "name", "status", "is_gated", "agent", "created_at", "finished_at"]
    list_filter = ["status", "name", "is_gated", ("message__conversation__agent", admin.RelatedOnlyFieldListFilter), "created_at"]
    search_fields = ["name", "call_id", "result", "error", "=message__conversation__id"]
    list_select_related = ["message__conversation__agent"]

    @admin.display(description="agent")
    def agent(self, call: ToolCall) -> str:
        return call.message.conversation.agent.slug


@admin.register(OutboxEmail)
class OutboxEmailAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["to", "subject", "conversation", "sent_at"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "scope", "created_at", "last_used_at"]
    list_filter = ["scope"]
    readonly_fields = ["key_hash"]
