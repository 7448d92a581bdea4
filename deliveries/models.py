"""What every channel stores, as abstract models each channel's own tables inherit: the outbox row
(Outbox), the copy of one approval shown to one person (Delivery: the version it showed, and whether
whole), and the one-time code that links an outside account (LinkCode)."""
import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone


class Outbox(models.Model):
    """A message to send, stored before it is sent: queued, then claimed by a conditional update
    (so a retry and the sweep never both send it), then sent, closed (no longer wanted: decided
    first, or its deadline moved) or failed (the channel kept refusing it: shown in the admin).
    A restart loses none: the sweep sends again what a lost task left queued (outbox.lost)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENT = "sent"
        CLOSED = "closed"
        FAILED = "failed"

    # The path from a row to its approval: a reply's is through the request it answers.
    approval_path = "approval"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Delivery(Outbox):
    """One approval shown to one person on one channel. What its last send showed is stored with
    it: the version (`shown_hash`), whether it showed the call whole (`complete`: a cut one can
    reject, never approve), and the deadline it was warned of (`warned_for`: the sweep warns anew
    a copy that missed its warning, and an extended deadline gets a warning of its own)."""

    shown_hash = models.CharField(max_length=64, blank=True, help_text="The version its last send showed.")
    complete = models.BooleanField(
        default=False, help_text="Whether its last send showed the whole call: only then could it approve (else reject only)."
    )
    warned_for = models.DateTimeField(null=True, blank=True, help_text="The deadline its reader was warned of.")

    class Meta:
        abstract = True


CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off one screen, typed on another
CODE_LENGTH = 10


class LinkRefused(Exception):
    """Why a code links nothing, in words for the person who sent it."""


class LinkCode(models.Model):
    """A one-time code that links the outside account that sends it to `user`: only its hash is
    stored, it works once, for a few minutes, and a new one retires the older ones."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    code_hash = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # Where a person gets a new code, for the refusal they read.
    where_to_get_one = "your profile page"

    class Meta:
        abstract = True

    @staticmethod
    def hash(code: str) -> str:
        return hashlib.sha256(code.strip().upper().encode()).hexdigest()

    @classmethod
    def issue(cls, user, *, minutes: int) -> str:
        """A new code for `user`, valid once for `minutes`. Their older codes stop working."""
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        now = timezone.now()
        with transaction.atomic():
            cls.objects.filter(user=user, used_at__isnull=True).update(used_at=now)
            cls.objects.create(user=user, code_hash=cls.hash(code), expires_at=now + timedelta(minutes=minutes))
        return code

    @classmethod
    def redeem(cls, code: str):
        """The user `code` links, spending it: exactly once, even for two at the same moment.
        Call it inside the transaction that links, so a link that fails leaves the code unspent."""
        now = timezone.now()
        found = cls.objects.select_related("user").filter(code_hash=cls.hash(code)).first()
        if found is None or found.used_at is not None or found.expires_at <= now or not found.user.is_active:
            raise LinkRefused(f"That code is unknown, used or expired: get a new one on {cls.where_to_get_one}.")
        if not cls.objects.filter(pk=found.pk, used_at__isnull=True).update(used_at=now):
            raise LinkRefused("That code was just used.")
        return found.user
