"""Linked Slack accounts, and the messages sent: the failed ones are what operators look at."""
from django.contrib import admin

from .models import Reminder, SlackAccount, SlackMessage


@admin.register(SlackAccount)
class SlackAccountAdmin(admin.ModelAdmin):
    list_display = ["user", "team_id", "slack_user_id", "slack_username", "linked_at"]
    search_fields = ["user__username", "slack_username", "slack_user_id"]
    readonly_fields = ["user", "team_id", "slack_user_id", "slack_username", "linked_at"]

    def has_add_permission(self, request) -> bool:
        return False  # linked from Slack with a code, never typed in


@admin.register(SlackMessage)
class SlackMessageAdmin(admin.ModelAdmin):
    """Deliveries: filter on "failed" for those Slack kept refusing, with its last error."""

    list_display = ["approval", "account", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status"]
    search_fields = ["last_error", "account__user__username"]
    readonly_fields = ["approval", "account", "channel", "ts", "status", "attempts", "last_error", "shown_hash", "expires_seen", "votes_seen"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Reminder)
class ReminderAdmin(admin.ModelAdmin):
    list_display = ["message", "kind", "deadline", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status", "kind"]
    readonly_fields = ["message", "kind", "deadline", "status", "attempts", "last_error"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
