"""Mails for operators: failures (the mail server refused, or stayed down through every retry) with their error."""
from django.contrib import admin, messages

from hitl.celery import enqueue_on_commit

from . import requests
from .models import EmailDelivery, EmailPreference
from .tasks import send_mail


@admin.register(EmailDelivery)
class EmailDeliveryAdmin(admin.ModelAdmin):
    list_display = ["approval", "kind", "user", "address", "status", "attempts", "last_error", "updated_at"]
    list_filter = ["status", "kind"]
    search_fields = ["user__username", "address", "last_error"]
    readonly_fields = ["approval", "kind", "user", "address", "status", "shown_hash", "attempts", "last_error", "created_at", "updated_at"]
    actions = ["send_again"]

    @admin.action(description="Send the selected failed mails again (while their call waits)", permissions=["resend"])
    def send_again(self, request, queryset) -> None:
        ids = requests.retry_failed(list(queryset.values_list("pk", flat=True)))
        for delivery_id in ids:
            enqueue_on_commit(send_mail, delivery_id)
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
