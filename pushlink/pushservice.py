"""Talking to the browser's push service through pywebpush: one encrypted POST, signed with the
site's VAPID key. Failures come back as one exception that says whether trying again can help and
whether the subscription is gone."""
import json

import requests
from django.conf import settings
from pywebpush import WebPushException, webpush

from . import keys

GONE = (404, 410)  # the push service forgot the subscription: remove it


class PushFailed(Exception):
    def __init__(self, message: str, *, status: int | None = None, transient: bool = True):
        self.status, self.transient = status, transient
        super().__init__(message)

    @property
    def is_gone(self) -> bool:
        return self.status in GONE

    @property
    def is_transient(self) -> bool:
        """A timeout, a refused connection, 429 or 5xx: worth another try later."""
        if self.status is None:
            return self.transient
        return self.status == 429 or self.status >= 500


def enabled() -> bool:
    return settings.HITL_PUSH_NOTIFICATIONS


def push(subscription_info: dict, payload: dict, *, ttl: int, topic: str) -> None:
    """Send `payload` (JSON, aes128gcm) to one subscription. Topic: a newer message with the same
    topic replaces one the push service still holds for an offline device (the outcome replaces the request)."""
    try:
        webpush(
            subscription_info, data=json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
            vapid_private_key=keys.vapid(), vapid_claims={"sub": settings.HITL_VAPID_SUBJECT},
            ttl=max(ttl, 0), timeout=settings.HITL_PUSH_TIMEOUT, headers={"Urgency": "high", "Topic": topic},
        )
    except WebPushException as exc:
        status = exc.status_code
        # No response: pywebpush refused before sending (keys it cannot use): trying again will not help.
        raise PushFailed(f"{status or ''} {exc.message}".strip()[:500], status=status, transient=status is not None) from None
    except (requests.RequestException, OSError) as exc:
        raise PushFailed(f"{exc.__class__.__name__}: {exc}"[:500]) from None
    except (ValueError, TypeError) as exc:  # keys stored that cannot encrypt: trying again will not help
        raise PushFailed(f"{exc.__class__.__name__}: {exc}"[:500], transient=False) from None
