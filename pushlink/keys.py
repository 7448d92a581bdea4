"""The site's VAPID key pair: from settings (HITL_VAPID_PRIVATE_KEY / HITL_VAPID_PUBLIC_KEY), or
generated once into the var directory and read from there by every process after."""
import os
from functools import lru_cache

from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from py_vapid import Vapid
from py_vapid.utils import b64urlencode

KEY_FILE = "vapid_private_key.pem"


@lru_cache(maxsize=4)
def _vapid(private_key: str, path: str) -> Vapid:
    if private_key:
        try:
            if "BEGIN" in private_key:
                return Vapid.from_pem(private_key.encode())
            return Vapid.from_string(private_key)
        except Exception as exc:
            raise ImproperlyConfigured(f"HITL_VAPID_PRIVATE_KEY is not a P-256 private key: {exc}") from None
    if not os.path.exists(path):
        generated = Vapid()
        generated.generate_keys()
        written = f"{path}.{os.getpid()}"
        with open(os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as handle:
            handle.write(generated.private_pem())
        try:  # a link never replaces: two processes starting at once both keep the one linked first
            os.link(written, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(written)
    with open(path, "rb") as handle:
        return Vapid.from_pem(handle.read())


def vapid() -> Vapid:
    return _vapid(settings.HITL_VAPID_PRIVATE_KEY, str(settings.VAR_DIR / KEY_FILE))


def public_key() -> str:
    """The application server key a browser subscribes with (base64url, an uncompressed P-256 point)."""
    if settings.HITL_VAPID_PUBLIC_KEY:
        return settings.HITL_VAPID_PUBLIC_KEY
    point = vapid().public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return b64urlencode(point)
