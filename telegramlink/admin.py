"""Linked Telegram accounts and the messages sent, for auditors and for unlinking someone."""
from django.contrib import admin

from .models import ApprovalMessage, ExpiryWarning, Reminder, TelegramAccount


@admin.register(TelegramAccount)
class TelegramAccountAdmin(admin.ModelAdmin):
    list_display = ["user", "telegram_user_id", "telegram_username", "linked_at"]
    search_fields = ["user__username", "telegram_username"]
    readonly_fields = ["user", "telegram_user_id", "chat_id", "telegram_username", "linked_at", "awaiting", "awaiting_approval", "awaiting_shown_hash", "awaiting_complete"]

    def has_add_permission(self, request) -> bool:
        return False  # linked from Telegram with a code, never typed in


@admin.register(ApprovalMessage)
class ApprovalMessageAdmin(admin.ModelAdmin):
    list_display = ["approval", "account", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status"]
    readonly_fields = ["approval", "account", "chat_id", "message_id", "status", "attempts", "last_error", "votes_seen"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Reminder)
class ReminderAdmin(admin.ModelAdmin):
    list_display = ["message", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status"]
    readonly_fields = ["message", "status", "attempts", "last_error"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ExpiryWarning)
class ExpiryWarningAdmin(admin.ModelAdmin):
    list_display = ["message", "expires_at", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status"]
    readonly_fields = ["message", "expires_at", "status", "reply_id", "attempts", "last_error"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
