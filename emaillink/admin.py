"""Mails for operators: failures (the mail server refused, or stayed down through every retry) with their error."""
from django.contrib import admin

from .models import EmailDelivery, EmailPreference


@admin.register(EmailDelivery)
class EmailDeliveryAdmin(admin.ModelAdmin):
    list_display = ["approval", "user", "address", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status"]
    search_fields = ["user__username", "address", "last_error"]
    readonly_fields = ["approval", "user", "address", "status", "shown_hash", "attempts", "last_error", "created_at", "updated_at"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(EmailPreference)
class EmailPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "opted_out", "updated_at"]
    list_filter = ["opted_out"]
    search_fields = ["user__username", "user__email"]
