"""Devices and notifications for operators: failures (the push service refused, or stayed down
through every retry) are listed with their error."""
from django.contrib import admin

from .models import PushNotification, PushSubscription


@admin.register(PushSubscription)
class PushSubscriptionAdmin(admin.ModelAdmin):
    list_display = ["user", "device", "created_at"]
    search_fields = ["user__username", "endpoint"]
    readonly_fields = ["user", "endpoint", "p256dh", "auth", "user_agent", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False  # a browser subscribes itself from the profile page


@admin.register(PushNotification)
class PushNotificationAdmin(admin.ModelAdmin):
    list_display = ["approval", "kind", "user", "device", "status", "complete", "attempts", "last_error", "updated_at"]
    list_filter = ["status", "kind", "complete"]
    search_fields = ["user__username", "last_error"]
    readonly_fields = ["approval", "kind", "subscription", "user", "device", "status", "shown_hash", "complete", "attempts", "last_error", "created_at", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
