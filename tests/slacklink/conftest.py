"""What the slacklink tests share: the fake Slack each test talks to, and a request pending in alice's
linked account."""
import pytest
from django.test import Client

from tests.conftest import only_pending, start_conversation
from tests.slacklink.workspace import ALICE, link, request_to
from tests.standins.fake_slack import FakeSlack, django_poster


@pytest.fixture
def fake(settings):
    with FakeSlack(poster=django_poster(Client())) as slack:
        settings.SLACK_BOT_TOKEN = slack.token
        settings.SLACK_SIGNING_SECRET = slack.signing_secret
        settings.SLACK_API_BASE_URL = slack.url
        yield slack


@pytest.fixture
def pending(fake, alice, agent):
    """alice linked, with one pending write_file approval whose request reached her messages."""
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    message = request_to(fake, ALICE, approval)
    assert message is not None
    return approval, message
