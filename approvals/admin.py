from django.contrib import admin

from hitl.admin import ReadOnlyAdminMixin

from .models import Approval


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "tool_call", "status", "risk", "requested_at", "decided_by", "decided_via"]
    list_filter = ["status", "risk", "decided_via"]
