"""The audit admin for approvals and webhooks: searchable, filterable, read-only, exportable."""
import csv
import json

from django.contrib import admin
from django.http import HttpResponse
from django.utils import timezone

from hitl.admin import ReadOnlyAdminMixin

from .models import Approval, Rule, Webhook, WebhookDelivery
from .templatetags.approval_tags import edit_diff

EXPORT_COLUMNS = [
    "id", "status", "tool", "arguments", "risk", "reason", "approver_required", "agent", "conversation",
    "requested_by", "requested_at", "expires_at", "decided_by", "decided_via", "decided_at", "rejection_reason",
    "comment", "edited_by", "edited_arguments", "preview", "chain_position", "previous_hash", "decision_hash",
    "kind", "question", "plan", "answer",
]
# A cell starting with one of these is a formula to a spreadsheet (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralised(value) -> str:
    """A cell as text a spreadsheet shows and never runs: a leading quote before a formula's first
    character, as OWASP recommends (the csv module quotes the separators and quotes themselves)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "tool_name", "kind", "status", "risk", "requested_by", "requested_at", "decided_by", "decided_via", "decided_at"]
    list_filter = [
        "kind", "status", "risk", "decided_via", "approver_required", ("conversation__agent", admin.RelatedOnlyFieldListFilter),
        "tool_call__name", ("decided_by", admin.RelatedOnlyFieldListFilter), "requested_at", "decided_at",
    ]
    search_fields = ["tool_call__name", "reason", "rejection_reason", "comment", "requested_by__username", "decided_by__username", "=conversation__id"]
    list_select_related = ["tool_call", "requested_by", "decided_by"]
    date_hierarchy = "requested_at"
    actions = ["export_csv"]
    readonly_fields = ["edit_as_diff"]

    @admin.display(description="edit (− requested, + edited)")
    def edit_as_diff(self, approval: Approval) -> str:
        return "\n".join(edit_diff(approval)) if approval.is_edited else "not edited"

    @admin.display(description="tool", ordering="tool_call__name")
    def tool_name(self, approval: Approval) -> str:
        return approval.tool_call.name

    @admin.action(description="Export the selected decisions as CSV")
    def export_csv(self, request, queryset):
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="decisions-{timezone.now():%Y%m%d-%H%M%S}.csv"'
        writer = csv.writer(response)
        writer.writerow(EXPORT_COLUMNS)
        rows = queryset.select_related("tool_call", "conversation__agent", "requested_by", "decided_by", "edited_by")
        for a in rows.order_by("pk"):
            # Every cell: the model writes the arguments, users the reasons, and so on.
            writer.writerow(neutralised(cell) for cell in [
                a.pk, a.status, a.tool_call.name, a.tool_call.arguments, a.risk, a.reason, a.approver_required,
                a.conversation.agent.slug, a.conversation_id, a.requested_by.get_username(), a.requested_at.isoformat(),
                a.expires_at.isoformat() if a.expires_at else "", a.decided_by.get_username() if a.decided_by else "",
                a.decided_via, a.decided_at.isoformat() if a.decided_at else "", a.rejection_reason, a.comment,
                a.edited_by.get_username() if a.edited_by else "", a.edited_arguments if a.is_edited else "",
                a.preview["text"] if a.preview else "", a.chain_position, a.previous_hash, a.decision_hash,
                a.kind, *("" if value is None else json.dumps(value, ensure_ascii=False) for value in (a.question, a.plan, a.answer)),
            ])
        return response


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
    """Saved allow and deny rules. Changing or disabling one never changes a past decision (decided
    approvals are final); the decisions it made name it (Approval.rule)."""

    list_display = ["id", "effect", "tool", "scope", "agent", "conversation", "created_by", "uses", "max_uses", "last_used_at", "expires_at", "enabled"]
    list_filter = ["effect", "scope", "enabled", ("agent", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["tool", "note", "created_by__username", "=conversation__id"]
    readonly_fields = ["uses", "last_used_at", "created_at", "deleted_at"]
    raw_id_fields = ["conversation", "created_by"]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # disable it instead: the decisions it made keep naming it


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["url", "agent", "is_active", "created_at"]
    list_filter = ["is_active", "agent"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "event", "webhook", "approval", "status", "attempts", "last_status_code", "updated_at"]
    list_filter = ["status", "event", "webhook"]
    search_fields = ["webhook__url", "last_error"]
