"""Tool servers are managed here only: a stdio server is a command this host runs, so it is never
set from a chat, the API or the model. Here too an admin reviews a tool whose definition changed
since it was approved (a diff) and accepts it, or leaves it disabled."""
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from approvals.policy.admin import PolicyHistoryAdmin

from . import client, discovery, pins
from .models import AgentToolServer, ToolPin, ToolServer

DIFF_LINE_STYLES = {"+": "background:#e6ffec", "-": "background:#ffebe9", "@": "color:#6e7781"}


class AgentLinkInline(admin.TabularInline):
    model = AgentToolServer
    extra = 0
    fields = ["agent", "tools", "require_approval", "risks"]
    formfield_overrides = {models.JSONField: {"widget": forms.Textarea(attrs={"rows": 2, "cols": 30})}}  # fits 1280 px


@admin.register(ToolServer)
class ToolServerAdmin(PolicyHistoryAdmin):
    list_display = ["name", "transport", "enabled", "trusted", "tool_count", "unapproved", "refreshed_at", "refresh_error"]
    readonly_fields = ["tool_list", "refreshed_at", "refresh_error"]
    inlines = [AgentLinkInline]
    actions = ["refresh_tools"]

    @admin.display(description="tools")
    def tool_count(self, server: ToolServer) -> int:
        return len(server.tools)

    @admin.display(description="changed since approved")
    def unapproved(self, server: ToolServer) -> str:
        return ", ".join(pins.unapproved_tools(server)) or "-"

    @admin.display(description="tools as last listed")
    def tool_list(self, server: ToolServer) -> str:
        if not server.tools:
            return "(none listed yet: use the action “Refresh the tool lists”)"
        unapproved = set(pins.unapproved_tools(server))
        kept = ToolPin.objects.filter(server=server, name__in=unapproved).values_list("name", "pk", "definition_hash")
        kept = {name: (pk, digest) for name, pk, digest in kept}
        return format_html_join(
            ", ", "{}{}",
            ((tool["name"], _review_link(*kept.get(tool["name"], (None, ""))) if tool["name"] in unapproved else "") for tool in server.tools),
        )

    @admin.action(description="Refresh the tool lists")
    def refresh_tools(self, request, queryset):
        for server in queryset:
            try:
                tools = discovery.refresh(server)
            except client.ServerUnavailable as exc:
                self.message_user(request, f"{server.name}: {exc}", messages.ERROR)
                continue
            self.message_user(request, f"{server.name}: {len(tools)} tools.", messages.SUCCESS)
            if unapproved := pins.unapproved_tools(server):
                self.message_user(
                    request,
                    f"{server.name}: changed since approved by an admin, disabled until accepted (Tool definitions): "
                    f"{', '.join(unapproved)}.",
                    messages.WARNING,
                )


def _review_link(pin_id: int | None, approved_hash: str) -> str:
    said = "changed since approved by an admin" if approved_hash else "new since the first listing"
    if pin_id is None:
        return f" ({said}: disabled)"
    return format_html(' (<a href="{}">{}: review</a>)', reverse("admin:toolservers_toolpin_change", args=[pin_id]), said)


@admin.register(ToolPin)
class ToolPinAdmin(PolicyHistoryAdmin):
    """Read-only but for one button: accept the definition listed now, bound to the hash the page
    showed, so a listing that changed again after the admin looked is never accepted unseen."""

    change_form_template = "admin/toolservers/toolpin/change_form.html"
    list_display = ["name", "server", "state", "approved", "approved_at"]
    list_filter = ["server"]
    fields = ["server", "name", "state", "difference", "approved", "approved_at", "definition_hash", "listed_hash"]
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("server", "approved_by")

    def has_add_permission(self, request) -> bool:
        return False  # pins come from listings only

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # the page is read-only; accepting is its own POST (changeform_view)

    @admin.display(description="state")
    def state(self, pin: ToolPin) -> str:
        listed = pin.server.tool(pin.name)
        if listed is None:
            return "not listed now"
        if pins.definition_hash(listed) == pin.definition_hash:
            return "as approved"
        return "new since the first listing: disabled" if pin.definition is None else "changed since approved by an admin: disabled"

    @admin.display(description="approved by")
    def approved(self, pin: ToolPin) -> str:
        if pin.approved_by is not None:
            return pin.approved_by.get_username()
        return "the first listing (trust on first use)" if pin.approved_at else "nobody yet"

    @admin.display(description="listed hash")
    def listed_hash(self, pin: ToolPin) -> str:
        listed = pin.server.tool(pin.name)
        return pins.definition_hash(listed) if listed is not None else "-"

    @admin.display(description="approved → listed now")
    def difference(self, pin: ToolPin) -> str:
        lines = pins.difference(pin, pin.server.tool(pin.name))
        if not lines:
            return "No difference: the listed definition is the approved one."
        return format_html(
            '<pre class="pin-diff" style="white-space:pre-wrap;overflow-wrap:anywhere;max-width:60rem;margin:0;'
            'padding:.5rem;border:1px solid #d0d7de;font-size:.8rem;line-height:1.4">{}</pre>',
            format_html_join("", '<span style="display:block;{}">{}</span>', ((DIFF_LINE_STYLES.get(line[:1], ""), line) for line in lines)),
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        if request.method == "POST" and "_accept" in request.POST:
            return self._accept(request, object_id)
        pin = self.get_object(request, object_id)
        if pin is None:  # the admin's own "does not exist" redirect
            return super().change_view(request, object_id, form_url, extra_context)
        listed = pin.server.tool(pin.name)
        shown = pins.definition_hash(listed) if listed is not None else ""
        extra_context = (extra_context or {}) | {
            "shown_hash": shown,
            "can_accept": bool(shown) and shown != pin.definition_hash and request.user.has_perm("toolservers.change_toolpin"),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def _accept(self, request, object_id):
        if not request.user.has_perm("toolservers.change_toolpin"):
            raise PermissionDenied
        pin = self.get_object(request, object_id)
        if pin is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        try:
            pins.accept(pin.pk, user=request.user, shown_hash=request.POST.get("shown_hash", ""))
        except pins.ListedAgain as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.message_user(request, f"Accepted: {pin.server.name}'s {pin.name} is offered to the agents again.", messages.SUCCESS)
        return HttpResponseRedirect(request.path)


@admin.register(AgentToolServer)
class AgentToolServerAdmin(PolicyHistoryAdmin):
    list_display = ["agent", "server", "tools", "require_approval"]
    list_filter = ["agent", "server"]
