"""The slacklink tests' side of Slack: the people in the workspace, linking one, what the app sent
them, and a queued message sent or swept by hand."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals.models import Approval
from deliveries import outbox
from deliveries.tasks import sweep_channel
from slacklink import accounts
from slacklink.channel import CHANNEL
from slacklink.models import Reminder, SlackAccount, SlackMessage
from tests.conftest import only_pending, start_conversation

through_the_loop = pytest.mark.django_db(transaction=True)  # the signals that send are sent on commit

ALICE, BOB, CAROL, MALLORY, DANA, ERIN, STRANGER = "UALICE", "UBOB", "UCAROL", "UMALLORY", "UDANA", "UERIN", "USTRANGER"


def link(fake, user, slack_id: str) -> SlackAccount:
    status, body = fake.command(slack_id, f"link {accounts.issue_code(user)}")
    assert status == 200, body
    return SlackAccount.objects.get(user=user, slack_user_id=slack_id)


def shows(fake, message: dict, approval: Approval) -> bool:
    return re.search(rf"Request #{approval.pk}\b", fake.text_of(message)) is not None


def request_to(fake, slack_id: str, approval: Approval) -> dict | None:
    """The message that shows `approval` in `slack_id`'s messages with the app, as it is now."""
    return next((m for m in fake.messages_to(slack_id) if shows(fake, m, approval)), None)


def queued_unsent(settings, user, agent, text: str) -> tuple[Approval, SlackMessage]:
    """An approval requested while Slack was off, then queued by hand: its message not yet sent."""
    token = settings.SLACK_BOT_TOKEN
    settings.SLACK_BOT_TOKEN = ""
    approval = only_pending(start_conversation(user, agent, text))
    settings.SLACK_BOT_TOKEN = token
    (message_id,) = CHANNEL.queue(approval)
    return approval, SlackMessage.objects.get(pk=message_id)


def send(row) -> str:
    """One send of a queued message or reply, as its task makes it."""
    return outbox.send(CHANNEL, type(row), row.pk)


def sweep() -> None:
    """Slack's part of the beat sweep, once what a check of `outbox.lost()` stamped has aged."""
    SlackMessage.objects.update(updated_at=timezone.now() - timedelta(hours=1))
    Reminder.objects.update(updated_at=timezone.now() - timedelta(hours=1))
    sweep_channel(CHANNEL)
