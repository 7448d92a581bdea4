import secrets

from django.conf import settings
from django.db import models


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

    def __str__(self) -> str:
        return f"{self.user} ↔ telegram {self.telegram_user_id}"


class LinkCode(models.Model):
    """A one-time code that links the Telegram account that sends `/start <code>` to `user`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    code_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


def new_token() -> str:
    return secrets.token_urlsafe(12)  # 16 characters: callback_data stays far under Telegram's 64 bytes


class ApprovalMessage(models.Model):
    """One Telegram message showing one approval to one linked person: queued, sent (its buttons
    work while the approval waits), then closed (edited to the outcome, or never sent because the
    approval was decided first)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENT = "sent"
        CLOSED = "closed"
        FAILED = "failed"  # Telegram kept refusing it (a blocked bot, a deleted chat)

    approval = models.ForeignKey("approvals.Approval", on_delete=models.CASCADE, related_name="telegram_messages")
    account = models.ForeignKey(TelegramAccount, on_delete=models.CASCADE, related_name="messages")
    chat_id = models.BigIntegerField()
    message_id = models.BigIntegerField(null=True, blank=True, help_text="The newest delivered copy, edited to the outcome.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    votes_seen = models.PositiveIntegerField(
        default=0, help_text="How many votes its approval had when its text was last written: fewer than now, and it is edited."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["approval", "account"], name="telegramlink_one_message_per_person")]
        indexes = [models.Index(fields=["status", "updated_at"], name="telegramlink_msg_status_upd")]

    def __str__(self) -> str:
        return f"approval #{self.approval_id} to {self.account_id} ({self.status})"


class SentVersion(models.Model):
    """One send of an ApprovalMessage: the token its buttons carry and the version of the approval
    its text showed. A press decides only that version, so a copy Telegram delivered although the
    send timed out (then an edit, then the retry) never approves what the newer copy shows."""

    message = models.ForeignKey(ApprovalMessage, on_delete=models.CASCADE, related_name="versions")
    token = models.CharField(max_length=32, unique=True, default=new_token, help_text="What its buttons carry.")
    shown_hash = models.CharField(max_length=64, blank=True, help_text="Approval.shown_hash as the text rendered it.")
    complete = models.BooleanField(
        default=False, help_text="Whether its text showed the whole call: a press on a cut one can reject, never approve."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.message} as of {self.shown_hash[:12]}"


class QueuedReply(models.Model):
    """A reply a sent request gets (a reminder, an expiry warning): an outbox row like
    ApprovalMessage (queued, claimed by a conditional update to send, sent or failed; the sweep
    sends one a lost task left), so a restart loses none and none is sent twice."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENT = "sent"
        CLOSED = "closed"  # no longer to be sent (decided, or its deadline moved), or its button retired
        FAILED = "failed"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Reminder(QueuedReply):
    """The one "still waiting" a sent request gets once its routed approval's reminder is due."""

    message = models.OneToOneField(ApprovalMessage, on_delete=models.CASCADE, related_name="reminder")

    class Meta:
        indexes = [models.Index(fields=["status", "updated_at"], name="telegramlink_rem_status_upd")]

    def __str__(self) -> str:
        return f"reminder of {self.message} ({self.status})"


class ExpiryWarning(QueuedReply):
    """The "expires soon" reply a sent request gets when its approval's warning is due
    (approvals_expiring), with an Extend button: one per message and deadline, so an extended
    deadline gets a warning of its own."""

    message = models.ForeignKey(ApprovalMessage, on_delete=models.CASCADE, related_name="warnings")
    expires_at = models.DateTimeField(help_text="The deadline it warns of.")
    reply_id = models.BigIntegerField(null=True, blank=True, help_text="The warning's own message, edited once its Extend button is spent.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "expires_at"], name="telegramlink_one_warning_per_deadline")]
        indexes = [models.Index(fields=["status", "updated_at"], name="telegramlink_warn_status_upd")]

    def __str__(self) -> str:
        return f"expiry warning of {self.message} ({self.status})"
