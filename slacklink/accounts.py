"""Linking a user's Slack account: a one-time code from the site (or `manage.py slack_link_code`),
sent to the app as `/hitl link <code>`; unlinked from the profile page or with `/hitl unlink`."""
import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from .models import LinkCode, SlackAccount

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off one screen, typed on another
CODE_LENGTH = 10


class LinkRefused(Exception):
    """Why a code links nothing, in words for the person who sent it."""


def _hash(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def issue_code(user) -> str:
    """A new code for `user`, valid once for HITL_SLACK_CODE_MINUTES. Their older codes stop working."""
    code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    now = timezone.now()
    with transaction.atomic():
        LinkCode.objects.filter(user=user, used_at__isnull=True).update(used_at=now)
        LinkCode.objects.create(user=user, code_hash=_hash(code), expires_at=now + timedelta(minutes=settings.HITL_SLACK_CODE_MINUTES))
    return code


def link(code: str, *, team_id: str, slack_user_id: str, slack_username: str = "") -> SlackAccount:
    """Link the Slack user who sent `code` to the code's user (replacing a link either had)."""
    now = timezone.now()
    with transaction.atomic():
        found = LinkCode.objects.select_related("user").filter(code_hash=_hash(code)).first()
        if found is None or found.used_at is not None or found.expires_at <= now or not found.user.is_active:
            raise LinkRefused("That code is unknown, used or expired: get a new one on your profile page.")
        # Used exactly once, even by two commands at the same moment.
        if not LinkCode.objects.filter(pk=found.pk, used_at__isnull=True).update(used_at=now):
            raise LinkRefused("That code was just used.")
        SlackAccount.objects.filter(team_id=team_id, slack_user_id=slack_user_id).exclude(user=found.user).delete()
        try:
            account, _ = SlackAccount.objects.update_or_create(
                user=found.user,
                defaults={"team_id": team_id, "slack_user_id": slack_user_id, "slack_username": slack_username[:80]},
            )
        except IntegrityError:
            raise LinkRefused("That Slack account is being linked already; try again.") from None
    return account


def unlink_user(user) -> bool:
    return SlackAccount.objects.filter(user=user).delete()[0] > 0


def unlink_slack(team_id: str, slack_user_id: str) -> SlackAccount | None:
    account = SlackAccount.objects.select_related("user").filter(team_id=team_id, slack_user_id=slack_user_id).first()
    if account is not None:
        account.delete()
    return account


def account_of(team_id, slack_user_id) -> SlackAccount | None:
    """The linked, active account of the Slack user a signed request names; None for anyone else."""
    if not isinstance(team_id, str) or not isinstance(slack_user_id, str) or not team_id or not slack_user_id:
        return None
    return SlackAccount.objects.select_related("user").filter(
        team_id=team_id, slack_user_id=slack_user_id, user__is_active=True
    ).first()
