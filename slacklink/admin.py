"""Linked Slack accounts, and the messages sent: the failed ones are what operators look at."""
from django.contrib import admin

from deliveries.admin import OUTBOX_FIELDS, DeliveryAdmin, OutboxAdmin, RecordAdmin

from .channel import CHANNEL
from .models import Reminder, SlackAccount, SlackMessage


@admin.register(SlackAccount)
class SlackAccountAdmin(RecordAdmin):
    list_display = ["user", "team_id", "slack_user_id", "slack_username", "linked_at"]
    search_fields = ["user__username", "slack_username", "slack_user_id"]
    readonly_fields = ["user", "team_id", "slack_user_id", "slack_username", "linked_at"]  # linked from Slack with a code


@admin.register(SlackMessage)
class SlackMessageAdmin(DeliveryAdmin):
    channel = CHANNEL
    """Deliveries: filter on "failed" for those Slack kept refusing, with its last error."""

    list_display = ["approval", "account", *OUTBOX_FIELDS, "updated_at"]
    search_fields = ["last_error", "account__user__username"]
    readonly_fields = [
        "approval", "account", "channel", "ts", *OUTBOX_FIELDS, "shown_hash", "complete", "expires_seen", "votes_seen", "warned_for",
    ]


@admin.register(Reminder)
class ReminderAdmin(OutboxAdmin):
    list_display = ["message", "kind", "deadline", *OUTBOX_FIELDS, "updated_at"]
    list_filter = ["status", "kind"]
    readonly_fields = ["message", "kind", "deadline", *OUTBOX_FIELDS]
