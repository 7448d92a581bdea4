"""Linked Slack users, the one-time codes that link them, one outbox row per request sent to a
person (with the versions its buttons decide), and the signatures already seen (replays)."""
import secrets

from django.conf import settings
from django.db import models

from deliveries import models as base


class SlackAccount(models.Model):
    """A user's Slack identity, linked with `/hitl link <code>`. A press is authorised by the Slack
    user who pressed (team and user id, as Slack signs them), never by the channel it was pressed in."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_account")
    team_id = models.CharField(max_length=32)
    slack_user_id = models.CharField(max_length=32)
    slack_username = models.CharField(max_length=80, blank=True)
    linked_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team_id", "slack_user_id"], name="slacklink_slackaccount_one_user")]

    def __str__(self) -> str:
        return f"{self.user} ↔ slack {self.team_id}/{self.slack_user_id}"


class SlackChat(models.Model):
    """Where a linked person chats with their agent from Slack (chat.elsewhere): their direct
    messages with the app, or a channel where they mention it; the conversation it goes on in."""

    account = models.ForeignKey(SlackAccount, on_delete=models.CASCADE, related_name="chats")
    channel = models.CharField(max_length=32, help_text="The D… or C… id the messages come from, and the answers go to.")
    conversation = models.ForeignKey(
        "chat.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The conversation a message here goes on in (empty: the next one starts one).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "channel"], name="slacklink_slackchat_one_per_channel")]

    def __str__(self) -> str:
        return f"{self.account} in {self.channel}"


class LinkCode(base.LinkCode):
    """A one-time code that links the Slack user who sends `/hitl link <code>` to `user`."""


class SlackMessage(base.Delivery):
    """One Slack message showing one approval to one linked person (its life is the deliveries
    base's: queued, sent, closed to the outcome, or failed when Slack kept refusing it). Slack
    rewrites it in place, so it keeps where it is (channel, ts) and what its text shows now besides
    the version: the deadline and the votes counted. Its buttons carry the token of one rendering
    (SentVersion): a press decides only the version that rendering showed."""

    approval = models.ForeignKey("approvals.Approval", on_delete=models.CASCADE, related_name="slack_messages")
    account = models.ForeignKey(SlackAccount, on_delete=models.CASCADE, related_name="messages")
    channel = models.CharField(max_length=32, blank=True, help_text="The direct message channel Slack answered with.")
    ts = models.CharField(max_length=32, blank=True, help_text="The message's timestamp: its id for chat.update.")
    expires_seen = models.DateTimeField(null=True, blank=True, help_text="The deadline its text shows now (an extend moves it).")
    votes_seen = models.PositiveIntegerField(default=0, help_text="The votes its text counts.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["approval", "account"], name="slacklink_slackmessage_one_per_person"),
            models.CheckConstraint(condition=models.Q(status__in=["queued", "sent", "closed", "failed"]), name="slacklink_slackmessage_status"),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="slacklink_msg_status_upd")]

    def __str__(self) -> str:
        return f"approval #{self.approval_id} to {self.account_id} ({self.status})"


def new_token() -> str:
    return secrets.token_urlsafe(18)


class SentVersion(models.Model):
    """What the buttons of one rendering of a SlackMessage carry, the version of the approval that
    rendering showed, and whether it showed the call whole: a press decides that version or
    nothing, and a rendering that showed it cut (too long, or the sentence only) can reject, never approve."""

    message = models.ForeignKey(SlackMessage, on_delete=models.CASCADE, related_name="versions")
    token = models.CharField(max_length=32, unique=True, default=new_token)
    shown_hash = models.CharField(max_length=64, blank=True)
    complete = models.BooleanField(default=False, help_text="It showed every argument and the preview whole.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.message} as of {self.shown_hash[:12]}"


class SeenRequest(models.Model):
    """A signed request from Slack already handled: the same signature again is a replay. Kept for
    the verifier's window (five minutes), then swept."""

    signature = models.CharField(max_length=80, unique=True)
    seen_at = models.DateTimeField(auto_now_add=True, db_index=True)


class Reminder(base.Outbox):
    """A reply in a sent request's thread: the one "still waiting" when its routed approval's
    reminder is due, or the warning (with an Extend button) when its deadline is near, once per
    deadline. An outbox row like SlackMessage (closed unsent if its approval is decided before it
    goes), so a restart loses none and the sweep sends none twice."""

    approval_path = "message__approval"

    class Kind(models.TextChoices):
        STILL_WAITING = "still_waiting"
        EXPIRING = "expiring"

    message = models.ForeignKey(SlackMessage, on_delete=models.CASCADE, related_name="reminders")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.STILL_WAITING)
    deadline = models.DateTimeField(null=True, blank=True, help_text="The deadline an expiry warning warns of.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message"], condition=models.Q(kind="still_waiting"), name="slacklink_reminder_one_still_waiting"),
            models.UniqueConstraint(fields=["message", "deadline"], condition=models.Q(kind="expiring"), name="slacklink_reminder_one_warning_per_deadline"),
            models.CheckConstraint(condition=models.Q(kind__in=["still_waiting", "expiring"]), name="slacklink_reminder_kind"),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="slacklink_rem_status_upd")]

    def __str__(self) -> str:
        return f"{self.get_kind_display().lower()} of {self.message} ({self.status})"
