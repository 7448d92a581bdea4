"""Storing a browser's push subscription, checked first: the site will POST to its endpoint, so
only a push service's https address is taken (plain http to this machine too while DEBUG, for
local stand-ins: HITL_PUSH_ALLOW_LOOPBACK), and the keys must be what a browser makes (a P-256 point, a 16-byte secret)."""
import base64
import binascii
import ipaddress
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.db import IntegrityError, transaction

from .models import PushSubscription

LOOPBACK = {"localhost", "127.0.0.1", "::1"}


class BadSubscription(ValueError):
    """What the browser sent is no subscription this site will push to (a 400, saying why)."""


def parse(data) -> dict:
    """{endpoint, p256dh, auth} from a PushSubscription's JSON (`subscription.toJSON()`)."""
    if not isinstance(data, dict):
        raise BadSubscription("Send the subscription as a JSON object.")
    endpoint, keys = data.get("endpoint"), data.get("keys")
    if not isinstance(endpoint, str) or not isinstance(keys, dict):
        raise BadSubscription("A subscription has an endpoint and keys.")
    p256dh, auth = keys.get("p256dh"), keys.get("auth")
    if not isinstance(p256dh, str) or not isinstance(auth, str):
        raise BadSubscription("A subscription's keys are p256dh and auth.")
    check_endpoint(endpoint)
    point = _b64url(p256dh, "p256dh")
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    except ValueError:
        raise BadSubscription("p256dh is not a P-256 public key.") from None
    if len(_b64url(auth, "auth")) != 16:
        raise BadSubscription("auth is not a 16-byte secret.")
    return {"endpoint": endpoint, "p256dh": p256dh.rstrip("="), "auth": auth.rstrip("=")}


def check_endpoint(endpoint: str) -> None:
    if len(endpoint) > 1000:
        raise BadSubscription("The endpoint is too long.")
    try:
        url = urlsplit(endpoint)
        host, _ = url.hostname, url.port
    except ValueError:
        raise BadSubscription("The endpoint is not a URL.") from None
    if not host or url.username is not None or url.password is not None or any(c.isspace() for c in endpoint):
        raise BadSubscription("The endpoint is not a URL.")
    if url.scheme == "http" and settings.HITL_PUSH_ALLOW_LOOPBACK and host in LOOPBACK:
        return  # a local stand-in for a push service, in development and tests
    if url.scheme != "https":
        raise BadSubscription("A push service's endpoint is https.")
    if url.port not in (None, 443):
        raise BadSubscription("A push service listens on https's own port.")
    if not is_push_service(host):
        raise BadSubscription(f"{host} is not a push service this site sends to (HITL_PUSH_SERVICE_HOSTS).")


def is_push_service(host: str) -> bool:
    """A host of HITL_PUSH_SERVICE_HOSTS (".example.com" takes its subdomains; "*" any host but an IP address)."""
    host = host.lower().rstrip(".")
    for allowed in settings.HITL_PUSH_SERVICE_HOSTS:
        allowed = allowed.lower()
        if allowed == "*":
            try:
                ipaddress.ip_address(host)
            except ValueError:
                return True
        elif host == allowed or (allowed.startswith(".") and host.endswith(allowed)):
            return True
    return False


def save(user, *, endpoint: str, p256dh: str, auth: str, user_agent: str = "") -> PushSubscription:
    """Store (or renew) the subscription as `user`'s: a browser holds one per site, so the last
    person to turn notifications on in it is the one it notifies."""
    fields = {"user": user, "p256dh": p256dh, "auth": auth, "user_agent": user_agent[:300]}
    owned = PushSubscription.objects.filter(user=user).exclude(endpoint=endpoint).count()
    if owned >= settings.HITL_PUSH_MAX_DEVICES:
        raise BadSubscription(f"You have {owned} devices: remove one first.")
    try:
        with transaction.atomic():
            subscription, _ = PushSubscription.objects.update_or_create(endpoint=endpoint, defaults=fields)
    except IntegrityError:  # the same browser posting twice at once: the other stored it
        subscription = PushSubscription.objects.get(endpoint=endpoint)
        PushSubscription.objects.filter(pk=subscription.pk).update(**fields)
    return subscription


def _b64url(value: str, name: str) -> bytes:
    if len(value) > 200:
        raise BadSubscription(f"{name} is too long.")
    try:
        return base64.urlsafe_b64decode(value.rstrip("=") + "=" * (-len(value.rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        raise BadSubscription(f"{name} is not base64url.") from None
