"""Mails for operators: failures (the mail server refused, or stayed down through every retry) with their error."""
from django.contrib import admin, messages

from deliveries import outbox
from deliveries.tasks import send_later

from .channel import CHANNEL
from .models import EmailDelivery, EmailPreference


@admin.register(EmailDelivery)
class EmailDeliveryAdmin(admin.ModelAdmin):
    list_display = ["approval", "kind", "user", "address", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__username", "address", "last_error"]
    readonly_fields = ["approval", "kind", "user", "address", "status", "shown_hash", "warned_for", "attempts", "last_error", "created_at", "updated_at"]
    actions = ["send_again"]

    @admin.action(description="Send the selected failed mails again (while their call waits)", permissions=["resend"])
    def send_again(self, request, queryset) -> None:
        ids = outbox.retry_failed(CHANNEL, list(queryset.values_list("pk", flat=True)))
        send_later(CHANNEL, ids)
        self.message_user(request, f"{len(ids)} mail(s) queued again.", messages.SUCCESS)

    def has_resend_permission(self, request) -> bool:
        return request.user.has_perm("emaillink.change_emaildelivery")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # what was sent is a record: only "send again" touches it


@admin.register(EmailPreference)
class EmailPreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "opted_out", "updated_at"]
    list_filter = ["opted_out"]
    search_fields = ["user__username", "user__email"]
