"""Mails for operators: failures (the mail server refused, or stayed down through every retry) with their error."""
from django.contrib import admin

from deliveries.admin import OUTBOX_FIELDS, DeliveryAdmin

from .channel import CHANNEL
from .models import EmailDelivery, EmailPreference


@admin.register(EmailDelivery)
class EmailDeliveryAdmin(DeliveryAdmin):
    channel = CHANNEL
    list_display = ["approval", "kind", "user", "address", *OUTBOX_FIELDS, "updated_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__username", "address", "last_error"]
    readonly_fields = ["approval", "kind", "user", "address", *OUTBOX_FIELDS, "shown_hash", "warned_for", "created_at", "updated_at"]


@admin.register(EmailPreference)
class EmailPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "opted_out", "updated_at"]
    list_filter = ["opted_out"]
    search_fields = ["user__username", "user__email"]
