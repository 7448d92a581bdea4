"""What every channel's admin shares: the rows a channel makes (a linked account, a message sent)
are a record, shown and never typed in; its outbox rows are filtered on status, so that operators
find what a channel kept refusing, with its last error."""
from django.contrib import admin, messages

# Every outbox row's life, for a channel admin's list and its read-only fields.
OUTBOX_FIELDS = ["status", "attempts", "last_error"]


class RecordAdmin(admin.ModelAdmin):
    """Rows the app makes: never added by hand."""

    def has_add_permission(self, request) -> bool:
        return False


class OutboxAdmin(RecordAdmin):
    """An outbox row: read only (an admin action may send a failed one again)."""

    list_filter = ["status"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class DeliveryAdmin(OutboxAdmin):
    """A channel's copies of approvals, with the operator's "send again" for the failed ones of
    calls still waiting (the channel fixed: a mail server back, a bot unblocked)."""

    channel = None  # the deliveries.channels.Channel whose rows these are
    actions = ["send_again"]

    @admin.action(description="Send the selected failed ones again (while their call waits)", permissions=["resend"])
    def send_again(self, request, queryset) -> None:
        from . import outbox
        from .tasks import send_later

        ids = outbox.retry_failed(self.channel, list(queryset.values_list("pk", flat=True)))
        send_later(self.channel, ids)
        self.message_user(request, f"{len(ids)} queued again.", messages.SUCCESS)

    def has_resend_permission(self, request) -> bool:
        meta = self.model._meta
        return request.user.has_perm(f"{meta.app_label}.change_{meta.model_name}")
