"""What the emaillink tests share: the mail server each test mails to (tests/standins/smtp_sink.py,
reached through Django's SMTP backend), and alice's pending approval with its mail in her inbox."""
import pytest

from tests.conftest import only_pending, start_conversation
from tests.emaillink.recipient import BASE, with_address
from tests.standins.smtp_sink import SmtpSink


@pytest.fixture
def sink(settings):
    with SmtpSink() as smtp:
        settings.HITL_EMAIL_APPROVALS = True
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = smtp.host, smtp.port, False
        settings.EMAIL_TIMEOUT = 5
        settings.HITL_BASE_URL = BASE
        yield smtp


@pytest.fixture
def pending(sink, alice, agent):
    """alice's pending write_file approval, its mail in her inbox."""
    with_address(alice)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    (mail,) = sink.messages("alice@example.org")
    return approval, mail
