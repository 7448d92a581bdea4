"""Linking a user's Telegram account: a one-time code from the site (the deliveries base's
LinkCode), sent to the bot as `/start <code>`; unlinking from the page or with `/stop`."""
from django.conf import settings
from django.db import IntegrityError, transaction

from deliveries.models import LinkRefused

from .models import LinkCode, TelegramAccount


def issue_code(user) -> str:
    """A new code for `user`, valid for HITL_TELEGRAM_CODE_MINUTES, once. Their older codes stop working."""
    return LinkCode.issue(user, minutes=settings.HITL_TELEGRAM_CODE_MINUTES)


def link(code: str, *, telegram_user_id: int, chat_id: int, telegram_username: str = "") -> TelegramAccount:
    """Link the Telegram user who sent `code` to the code's user (replacing a link either had)."""
    with transaction.atomic():  # a link that fails leaves the code unspent
        user = LinkCode.redeem(code)
        TelegramAccount.objects.filter(telegram_user_id=telegram_user_id).exclude(user=user).delete()
        try:
            account, _ = TelegramAccount.objects.update_or_create(
                user=user,
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
