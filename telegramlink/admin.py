"""Linked Telegram accounts and the messages sent, for auditors and for unlinking someone."""
from django.contrib import admin

from deliveries.admin import OUTBOX_FIELDS, DeliveryAdmin, OutboxAdmin, RecordAdmin

from .channel import CHANNEL
from .models import ApprovalMessage, ExpiryWarning, Reminder, TelegramAccount


@admin.register(TelegramAccount)
class TelegramAccountAdmin(RecordAdmin):
    list_display = ["user", "telegram_user_id", "telegram_username", "linked_at"]
    search_fields = ["user__username", "telegram_username"]
    readonly_fields = ["user", "telegram_user_id", "chat_id", "telegram_username", "linked_at", "awaiting", "awaiting_approval", "awaiting_shown_hash", "awaiting_complete"]


@admin.register(ApprovalMessage)
class ApprovalMessageAdmin(DeliveryAdmin):
    channel = CHANNEL
    list_display = ["approval", "account", *OUTBOX_FIELDS, "updated_at"]
    readonly_fields = ["approval", "account", "chat_id", "message_id", *OUTBOX_FIELDS, "votes_seen", "shown_hash", "complete", "warned_for"]


@admin.register(Reminder)
class ReminderAdmin(OutboxAdmin):
    list_display = ["message", *OUTBOX_FIELDS, "updated_at"]
    readonly_fields = ["message", *OUTBOX_FIELDS]


@admin.register(ExpiryWarning)
class ExpiryWarningAdmin(OutboxAdmin):
    list_display = ["message", "expires_at", *OUTBOX_FIELDS, "updated_at"]
    readonly_fields = ["message", "expires_at", "reply_id", *OUTBOX_FIELDS]
