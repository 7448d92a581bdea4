"""Linking a user's Slack account: a one-time code from the site (or `manage.py slack_link_code`),
sent to the app as `/hitl link <code>`; unlinked from the profile page or with `/hitl unlink`."""
from django.conf import settings
from django.db import IntegrityError, transaction

from deliveries.models import LinkRefused

from .models import LinkCode, SlackAccount


def issue_code(user) -> str:
    """A new code for `user`, valid once for HITL_SLACK_CODE_MINUTES. Their older codes stop working."""
    return LinkCode.issue(user, minutes=settings.HITL_SLACK_CODE_MINUTES)


def link(code: str, *, team_id: str, slack_user_id: str, slack_username: str = "") -> SlackAccount:
    """Link the Slack user who sent `code` to the code's user (replacing a link either had)."""
    with transaction.atomic():
        user = LinkCode.redeem(code)
        SlackAccount.objects.filter(team_id=team_id, slack_user_id=slack_user_id).exclude(user=user).delete()
        try:
            account, _ = SlackAccount.objects.update_or_create(
                user=user, defaults={"team_id": team_id, "slack_user_id": slack_user_id, "slack_username": slack_username[:80]},
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
