"""Devices and notifications for operators: failures (the push service refused, or stayed down
through every retry) are listed with their error."""
from django.contrib import admin

from deliveries.admin import OUTBOX_FIELDS, DeliveryAdmin, RecordAdmin

from .channel import CHANNEL
from .models import PushNotification, PushSubscription


@admin.register(PushSubscription)
class PushSubscriptionAdmin(RecordAdmin):
    list_display = ["user", "device", "created_at"]
    search_fields = ["user__username", "endpoint"]
    readonly_fields = ["user", "endpoint", "p256dh", "auth", "user_agent", "created_at"]  # a browser subscribes itself


@admin.register(PushNotification)
class PushNotificationAdmin(DeliveryAdmin):
    channel = CHANNEL
    list_display = ["approval", "kind", "user", "device", "complete", *OUTBOX_FIELDS, "updated_at"]
    list_filter = ["status", "kind", "complete"]
    search_fields = ["user__username", "last_error"]
    readonly_fields = ["approval", "kind", "subscription", "user", "device", *OUTBOX_FIELDS, "shown_hash", "complete", "warned_for", "created_at", "updated_at"]
