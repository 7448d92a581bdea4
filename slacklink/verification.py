"""Is this request from Slack, and new? Its v0 signature (slack_sdk's SignatureVerifier: HMAC-SHA256
of "v0:{timestamp}:{body}" with SLACK_SIGNING_SECRET, the timestamp within five minutes of now),
and a signature never seen before: the same signed request sent again (a replay) is refused."""
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from slack_sdk.signature import SignatureVerifier

from .models import SeenRequest

WINDOW = timedelta(minutes=5)  # SignatureVerifier's: a timestamp further from now is refused


class Refused(Exception):
    """Why a request is not taken, and its 4xx status."""

    def __init__(self, message: str, status: int = 401):
        super().__init__(message)
        self.status = status


def check(body: bytes, headers) -> None:
    """Raise Refused unless `body` is signed by Slack, recently, and seen for the first time."""
    timestamp, signature = headers.get("X-Slack-Request-Timestamp", ""), headers.get("X-Slack-Signature", "")
    if not timestamp.isascii() or not timestamp.isdigit() or not signature.isascii() or not signature.startswith("v0="):
        raise Refused("Missing or malformed signature.")
    try:
        valid = SignatureVerifier(settings.SLACK_SIGNING_SECRET).is_valid(body=body, timestamp=timestamp, signature=signature)
    except (ValueError, UnicodeDecodeError, OverflowError):
        valid = False
    if not valid:
        raise Refused("Bad signature or stale timestamp.")
    try:
        with transaction.atomic():
            SeenRequest.objects.create(signature=signature[:80])
    except IntegrityError:
        raise Refused("This request was already handled (a replay).", status=409) from None


def forget_old(*, now=None) -> None:
    """Signatures older than the window cannot be replayed anyway: their timestamp is refused."""
    SeenRequest.objects.filter(seen_at__lt=(now or timezone.now()) - 2 * WINDOW).delete()
