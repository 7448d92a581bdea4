"""Linking a user's Telegram account: a one-time code from the site, sent to the bot as
`/start <code>`; unlinking from the page or with `/stop`."""
import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import LinkCode, TelegramAccount

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: typed on a phone
CODE_LENGTH = 10


class LinkRefused(Exception):
    """Why a code links nothing, in words for the person who sent it."""


def _hash(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def issue_code(user) -> str:
    """A new code for `user`, valid for HITL_TELEGRAM_CODE_MINUTES, once. Their older codes stop working."""
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    now = timezone.now()
    with transaction.atomic():
        LinkCode.objects.filter(user=user, used_at__isnull=True).update(used_at=now)
        LinkCode.objects.create(
            user=user, code_hash=_hash(code), expires_at=now + timedelta(minutes=settings.HITL_TELEGRAM_CODE_MINUTES)
        )
    return code


def link(code: str, *, telegram_user_id: int, chat_id: int, telegram_username: str = "") -> TelegramAccount:
    """Link the Telegram user who sent `code` to the code's user (replacing a link either had)."""
    now = timezone.now()
    with transaction.atomic():
        found = LinkCode.objects.select_related("user").filter(code_hash=_hash(code)).first()
        if found is None or found.used_at is not None or found.expires_at <= now or not found.user.is_active:
            raise LinkRefused("That code is unknown, used or expired: get a new one on the site's Telegram page.")
        # Used exactly once, even by two /start at the same moment.
        if not LinkCode.objects.filter(pk=found.pk, used_at__isnull=True).update(used_at=now):
            raise LinkRefused("That code was just used.")
        TelegramAccount.objects.filter(telegram_user_id=telegram_user_id).exclude(user=found.user).delete()
        try:
            account, _ = TelegramAccount.objects.update_or_create(
                user=found.user,
                defaults={
                    "telegram_user_id": telegram_user_id,
                    "chat_id": chat_id,
                    "telegram_username": telegram_username[:64],
                    "awaiting": "",
                    "awaiting_approval": None,
                    "awaiting_shown_hash": "",
                    "awaiting_complete": False,
                },
            )
        except IntegrityError:
            raise LinkRefused("That Telegram account is being linked already; try again.") from None
    return account


def unlink_user(user) -> bool:
    return TelegramAccount.objects.filter(user=user).delete()[0] > 0


def unlink_telegram(telegram_user_id: int) -> TelegramAccount | None:
    account = TelegramAccount.objects.select_related("user").filter(telegram_user_id=telegram_user_id).first()
    if account is not None:
        account.delete()
    return account
