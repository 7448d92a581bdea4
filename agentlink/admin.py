"""A2A tasks, for auditors: which turns of which conversations an A2A client started. Read-only:
their state is the conversation's, and their decisions are in Approvals (decided via a2a). The push
notification configs clients set on them (read-only; an operator may delete one). And the remote
A2A agents our agents call as tools (agentlink.remote), managed here only."""
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.db import transaction
from django.utils.html import format_html

from chat.models import Agent
from chat.tools import ToolError

from . import remote
from .models import PushConfig, RemoteAgent, Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "owner", "position", "canceled", "final_state", "hops", "created_at"]
    list_filter = ["canceled", "final_state"]
    list_select_related = ["conversation__owner"]
    search_fields = ["id", "conversation__id", "conversation__owner__username"]

    @admin.display(description="owner")
    def owner(self, task: Task) -> str:
        return task.conversation.owner.get_username()

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PushConfig)
class PushConfigAdmin(admin.ModelAdmin):
    """Where A2A clients have asked for a task's state changes to be POSTed. Read-only: the client
    owns a config (through A2A); an operator may delete one whose URL should not be called. The
    token and the authentication the client sent are credentials: shown masked, never in full."""

    list_display = ["config_id", "owner", "receiver", "masked_token", "created_at", "task"]
    list_select_related = ["owner"]
    search_fields = ["config_id", "task__id", "owner__username", "url"]
    fields = ["task", "config_id", "owner", "url", "masked_token", "authentication_schemes", "created_at"]
    readonly_fields = fields

    @admin.display(description="token")
    def masked_token(self, config: PushConfig) -> str:
        return mask(config.token)

    @admin.display(description="receiver", ordering="url")
    def receiver(self, config: PushConfig) -> str:
        """The host the states are POSTed to (the whole URL is on the config's page)."""
        return urlsplit(config.url).hostname or config.url[:60]

    @admin.display(description="authentication")
    def authentication_schemes(self, config: PushConfig) -> str:
        """The scheme the client named (A2A's AuthenticationInfo, as agentlink.push stores it), never its credentials."""
        info = config.authentication or {}
        if not info:
            return "-"
        return f"{str(info.get('scheme', ''))[:50] or '(no scheme)'} (credentials {'set' if info.get('credentials') else 'none'})"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class RemoteAgentForm(forms.ModelForm):
    """The token is written, never shown back: left blank, the stored one is kept. The agents ticked
    get `<name>__ask` in their tools (and lose it when unticked, or renamed): each a policy version."""

    token = forms.CharField(
        required=False, max_length=500, strip=True, widget=forms.PasswordInput(render_value=False),
        help_text="An API token the remote issued us (sent as Authorization: Bearer …). Leave blank to keep the stored one.",
    )
    card_url = forms.URLField(max_length=500, assume_scheme="https", help_text=RemoteAgent._meta.get_field("card_url").help_text)
    clear_token = forms.BooleanField(required=False, help_text="Remove the stored token.")
    agents = forms.ModelMultipleChoiceField(
        Agent.objects.order_by("slug"), required=False, widget=FilteredSelectMultiple("agents", is_stacked=False),
        help_text="The agents that may call it: <name>__ask is added to their tools.",
    )

    class Meta:
        model = RemoteAgent
        fields = ["name", "card_url", "token", "clear_token", "timeout_seconds", "enabled"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.old_tool = self.instance.tool_name if self.instance.pk else ""
        if self.instance.pk:
            self.fields["agents"].initial = [agent.pk for agent in self.instance.linked_agents()]

    def clean_token(self) -> str:
        token = self.cleaned_data.get("token", "")
        if not token and self.instance.pk and not self.data.get("clear_token"):
            return self.instance.token
        return token

    def save(self, commit=True):
        if self.cleaned_data.get("clear_token"):
            self.instance.token = ""
        return super().save(commit)

    def link_agents(self) -> None:
        """Give the ticked agents the tool, and take it (by its old name too) from the others."""
        wanted, tool = {agent.pk for agent in self.cleaned_data.get("agents") or []}, self.instance.tool_name
        for agent in Agent.objects.order_by("pk"):
            kept = [name for name in agent.tools or [] if name not in (tool, self.old_tool)]
            tools = kept + [tool] if agent.pk in wanted else kept
            if tools != (agent.tools or []):
                agent.tools = tools
                agent.save(update_fields=["tools"])


@admin.register(RemoteAgent)
class RemoteAgentAdmin(admin.ModelAdmin):
    """Another A2A agent, called as a tool: saving reads its card (its name and skills, which name
    its calls here); the token is shown masked."""

    form = RemoteAgentForm
    list_display = ["name", "card_url", "masked_token", "timeout_seconds", "enabled", "linked", "refreshed_at", "refresh_error"]
    readonly_fields = ["masked_token", "tool", "card_summary", "refreshed_at", "refresh_error"]
    actions = ["refresh_cards"]

    @admin.display(description="token")
    def masked_token(self, remote: RemoteAgent) -> str:
        return mask(remote.token)

    @admin.display(description="the model calls")
    def tool(self, remote: RemoteAgent) -> str:
        return remote.tool_name if remote.name else "-"

    @admin.display(description="linked agents")
    def linked(self, remote: RemoteAgent) -> str:
        return ", ".join(agent.slug for agent in remote.linked_agents()) or "-"

    @admin.display(description="card as last read")
    def card_summary(self, remote: RemoteAgent) -> str:
        card = remote.card or {}
        if not card:
            return "(not read yet: save, or use the action “Read the cards again”)"
        skills = ", ".join(str(skill.get("id") or skill.get("name")) for skill in card.get("skills") or [] if isinstance(skill, dict))
        return format_html("{}: {}<br>Its calls: {}", card.get("name", ""), card.get("description", ""), skills or "none listed")

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        form.link_agents()
        # Read once saved: the admin's transaction must not hold SQLite's write lock while a remote answers.
        transaction.on_commit(lambda: self._refresh(request, form.instance))

    @admin.action(description="Read the cards again")
    def refresh_cards(self, request, queryset):
        for found in queryset:
            self._refresh(request, found)

    def _refresh(self, request, found: RemoteAgent) -> None:
        try:
            card = remote.refresh(found)
        except ToolError as exc:
            self.message_user(request, f"{found.name}: {exc}", messages.WARNING)
        else:
            self.message_user(request, f"{found.name}: its card reads “{card.get('name', '')}”, {len(card.get('skills') or [])} calls.", messages.SUCCESS)


def mask(token: str) -> str:
    """A stored token as the admin shows it: its last four characters."""
    return f"••••{token[-4:]}" if len(token) > 8 else ("••••" if token else "-")
