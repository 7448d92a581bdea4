from django.contrib import admin

from .models import Approval


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    """Decisions are an audit record: nobody adds, edits or deletes them here."""

    list_display = ["id", "tool_call", "status", "risk", "requested_at", "decided_by", "decided_via"]
    list_filter = ["status", "risk", "decided_via"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
