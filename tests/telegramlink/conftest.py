"""What the telegramlink tests share: the fake Bot API each test talks to, and a request pending
for alice's linked account."""
import functools

import httpx
import pytest
from telegram.request import HTTPXRequest

from telegramlink import bot
from tests.conftest import only_pending, start_conversation
from tests.telegramlink.phone import ALICE_TG, RefusingTelegram, link, request_to


@pytest.fixture(scope="session")
def ssl_context():
    return httpx.create_ssl_context()


@pytest.fixture
def fake(settings, monkeypatch, ssl_context):
    # Every Bot API call builds its Bot, and each of its two HTTPX clients loads the CA bundle again
    # (~45 ms each, most of a call's time): here they share one context. Nothing else changes.
    monkeypatch.setattr(bot, "HTTPXRequest", functools.partial(HTTPXRequest, httpx_kwargs={"verify": ssl_context}))
    with RefusingTelegram() as telegram:
        settings.TELEGRAM_BOT_TOKEN = telegram.token
        settings.TELEGRAM_API_BASE_URL = telegram.url
        yield telegram


@pytest.fixture
def pending(fake, alice, agent):
    """alice linked, with one pending write_file approval whose request reached her phone."""
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    request = request_to(fake, ALICE_TG, approval)
    assert request is not None
    return approval, fake.buttons(request)
