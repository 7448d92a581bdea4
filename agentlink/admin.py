"""A2A tasks, for auditors: which turns of which conversations an A2A client started. Read-only:
their state is the conversation's, and their decisions are in Approvals (decided via a2a)."""
from django.contrib import admin

from .models import Task


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "owner", "position", "canceled", "final_state", "created_at"]
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
