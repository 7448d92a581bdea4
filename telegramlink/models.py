"""Telegram's own rows: the linked account, its link codes, and its outbox on the deliveries base
(the request messages, the versions they showed, and the replies they get)."""
import secrets

from django.conf import settings
from django.db import models

from deliveries.models import Delivery, LinkCode as BaseLinkCode, Outbox


class TelegramAccount(models.Model):
    """A user's Telegram identity, linked with a one-time code. A press is authorised by the
    Telegram user id it comes from (`telegram_user_id`), never by the chat it was pressed in."""

    class Awaiting(models.TextChoices):
        NOTHING = ""
        REASON = "reason"  # why they reject
        CONFIRMATION = "confirmation"  # a critical call's typed confirmation
        ANSWER = "answer"  # a question's typed answer

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="telegram_account")
    telegram_user_id = models.BigIntegerField(unique=True)
    chat_id = models.BigIntegerField(help_text="The private chat with the bot, where its requests go.")
    telegram_username = models.CharField(max_length=64, blank=True)
    linked_at = models.DateTimeField(auto_now_add=True)
    # What the bot asked this person to type next, and for which approval.
    awaiting = models.CharField(max_length=16, choices=Awaiting.choices, blank=True)
    awaiting_approval = models.ForeignKey(
        "approvals.Approval", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The version the pressed message showed: what the typed reply decides, or nothing if it changed.
    awaiting_shown_hash = models.CharField(max_length=64, blank=True)
    # Whether that message showed the call whole: a typed confirmation after a cut one approves nothing.
    awaiting_complete = models.BooleanField(default=False)
    # The conversation this chat talks to (chat.elsewhere): a message to the bot goes on in it; /new ends it.
    conversation = models.ForeignKey(
        "chat.Conversation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The conversation a message to the bot goes on in (empty: the next one starts one).",
    )

    def __str__(self) -> str:
        return f"{self.user} ↔ telegram {self.telegram_user_id}"


class LinkCode(BaseLinkCode):
    """A one-time code that links the Telegram account that sends `/start <code>` to `user`."""

    where_to_get_one = "the site's Telegram page"


def new_token() -> str:
    return secrets.token_urlsafe(12)  # 16 characters: callback_data stays far under Telegram's 64 bytes


class ApprovalMessage(Delivery):
    """One Telegram message showing one approval to one linked person (its life is the deliveries
    base's: queued, sent, its buttons working while the approval waits, rewritten in place as
    votes come in, the call is edited or its deadline extended, then closed to the outcome). Each
    send and each rewrite to a new version is a SentVersion: what a press on it decides."""

    approval = models.ForeignKey("approvals.Approval", on_delete=models.CASCADE, related_name="telegram_messages")
    account = models.ForeignKey(TelegramAccount, on_delete=models.CASCADE, related_name="messages")
    chat_id = models.BigIntegerField()
    message_id = models.BigIntegerField(null=True, blank=True, help_text="The newest delivered copy, edited to the outcome.")
    votes_seen = models.PositiveIntegerField(
        default=0, help_text="How many votes its approval had when its text was last written: fewer than now, and it is edited."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["approval", "account"], name="telegramlink_one_message_per_person"),
            models.CheckConstraint(condition=models.Q(status__in=Delivery.Status.values), name="telegramlink_message_status_valid"),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="telegramlink_msg_status_upd")]

    def __str__(self) -> str:
        return f"approval #{self.approval_id} to {self.account_id} ({self.status})"


class SentVersion(models.Model):
    """One send of an ApprovalMessage (or its rewrite to a new version): the token its buttons carry
    and the version of the approval its text showed. A press decides only that version, so a copy
    Telegram delivered although the send timed out (then an edit, then the retry) never approves
    what the newer copy shows."""

    message = models.ForeignKey(ApprovalMessage, on_delete=models.CASCADE, related_name="versions")
    token = models.CharField(max_length=32, unique=True, default=new_token, help_text="What its buttons carry.")
    shown_hash = models.CharField(max_length=64, blank=True, help_text="Approval.shown_hash as the text rendered it.")
    complete = models.BooleanField(
        default=False, help_text="Whether its text showed the whole call: a press on a cut one can reject, never approve."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.message} as of {self.shown_hash[:12]}"


class Reminder(Outbox):
    """The one "still waiting" a sent request gets, as a reply, once its routed approval's reminder is due."""

    approval_path = "message__approval"

    message = models.OneToOneField(ApprovalMessage, on_delete=models.CASCADE, related_name="reminder")

    class Meta:
        indexes = [models.Index(fields=["status", "updated_at"], name="telegramlink_rem_status_upd")]

    def __str__(self) -> str:
        return f"reminder of {self.message} ({self.status})"


class ExpiryWarning(Outbox):
    """The "expires soon" reply a sent request gets when its approval's warning is due
    (approvals_expiring), with an Extend button: one per message and deadline, so an extended
    deadline gets a warning of its own. Closed once its button is retired (extended, or decided)."""

    approval_path = "message__approval"

    message = models.ForeignKey(ApprovalMessage, on_delete=models.CASCADE, related_name="warnings")
    expires_at = models.DateTimeField(help_text="The deadline it warns of.")
    reply_id = models.BigIntegerField(null=True, blank=True, help_text="The warning's own message, edited once its Extend button is spent.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "expires_at"], name="telegramlink_one_warning_per_deadline")]
        indexes = [models.Index(fields=["status", "updated_at"], name="telegramlink_warn_status_upd")]

    def __str__(self) -> str:
        return f"expiry warning of {self.message} ({self.status})"
