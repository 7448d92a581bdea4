"""The WebAuthn ceremonies (py_webauthn): register a passkey, and prove presence for one approval at
one version. Each challenge is random, issued to one user for one purpose, short-lived, and claimed
once by a conditional update before anything is verified, so a replayed answer finds it used."""
import json
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError
from django.http.request import split_domain_port
from django.utils import timezone
from webauthn import (
    generate_authentication_options, generate_registration_options, options_to_json,
    verify_authentication_response, verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url, parse_client_data_json
from webauthn.helpers import parse_authentication_credential_json, parse_registration_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria, PublicKeyCredentialDescriptor, ResidentKeyRequirement, UserVerificationRequirement,
)

from approvals.models import Approval
from approvals.services import StepUp
from core.inputs import storable

from .models import Challenge, Passkey

MAX_PASSKEYS = 10
MAX_OPEN_CHALLENGES = 20  # a person approves a few calls a minute; more unexpired challenges is a script
# What a hostile or broken browser answer can raise inside the library, besides its own errors
# (bad base64, CBOR, JSON shapes): each is "we could not verify it", never a 500.
UNVERIFIABLE = (WebAuthnException, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError)


class CeremonyFailed(Exception):
    """The ceremony did not prove what it must: nothing was registered or decided."""


def relying_party(request) -> tuple[str, str]:
    """The RP id and origin: the settings', else the request's own host (ALLOWED_HOSTS checked it)."""
    host = request.get_host()
    rp_id = settings.HITL_WEBAUTHN_RP_ID or split_domain_port(host)[0].strip("[]")
    origin = settings.HITL_WEBAUTHN_ORIGIN or f"{request.scheme}://{host}"
    return rp_id, origin


def registration_options(request, user) -> str:
    """The options for navigator.credentials.create(), as JSON; the user's own passkeys excluded."""
    if user.passkeys.count() >= MAX_PASSKEYS:
        raise CeremonyFailed(f"You have {MAX_PASSKEYS} passkeys already: remove one first.")
    rp_id, _ = relying_party(request)
    options = generate_registration_options(
        rp_id=rp_id, rp_name=settings.HITL_WEBAUTHN_RP_NAME, user_name=user.get_username(),
        user_id=str(user.pk).encode(), challenge=_issue(user, Challenge.Purpose.REGISTER),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=_descriptors(user),
    )
    return options_to_json(options)


def register(request, user, *, name: str, credential) -> Passkey:
    """Verify the authenticator's answer to a registration challenge of this user's and keep the passkey."""
    name = storable(name or "").strip()[:100]
    if not name:
        raise CeremonyFailed("Give the passkey a name (where it lives: 'laptop', 'phone').")
    try:
        parsed = parse_registration_credential_json(_json(credential))
        row = _claim(user, parsed.response.client_data_json, Challenge.Purpose.REGISTER)
        rp_id, origin = relying_party(request)
        verified = verify_registration_response(
            credential=parsed, expected_challenge=base64url_to_bytes(row.challenge), expected_rp_id=rp_id,
            expected_origin=origin, require_user_verification=True,
        )
    except UNVERIFIABLE as exc:
        raise CeremonyFailed(f"The passkey could not be verified: {exc}") from None
    if user.passkeys.count() >= MAX_PASSKEYS:
        raise CeremonyFailed(f"You have {MAX_PASSKEYS} passkeys already: remove one first.")
    try:
        return Passkey.objects.create(
            user=user, credential_id=bytes_to_base64url(verified.credential_id), public_key=verified.credential_public_key,
            sign_count=verified.sign_count, name=name, created_at=timezone.now(),
        )
    except IntegrityError:
        raise CeremonyFailed("That passkey is registered already.") from None


def approval_options(request, user, approval: Approval) -> str:
    """The options for navigator.credentials.get() for approving `approval` at the version it shows
    now: user verification required, only this user's passkeys allowed."""
    allowed = _descriptors(user)
    if not allowed:
        raise CeremonyFailed("Approving this call needs a passkey: add one on your profile page first.")
    rp_id, _ = relying_party(request)
    challenge = _issue(user, Challenge.Purpose.APPROVE, approval=approval)
    options = generate_authentication_options(
        rp_id=rp_id, challenge=challenge, allow_credentials=allowed,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return options_to_json(options)


def prove(request, user, *, approval_id: int, credential) -> StepUp:
    """Verify the assertion answering a challenge issued to `user` for this approval: signed by one
    of their passkeys, user verified, its counter moved on. Returns the proof the decision service
    takes, for the version the challenge was issued for."""
    try:
        parsed = parse_authentication_credential_json(_json(credential))
        row = _claim(user, parsed.response.client_data_json, Challenge.Purpose.APPROVE, approval_id=approval_id)
        passkey = user.passkeys.filter(credential_id=parsed.id).first()
        if passkey is None:
            raise CeremonyFailed("That passkey is not one of yours on this site.")
        rp_id, origin = relying_party(request)
        verified = verify_authentication_response(
            credential=parsed, expected_challenge=base64url_to_bytes(row.challenge), expected_rp_id=rp_id,
            expected_origin=origin, credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=passkey.sign_count, require_user_verification=True,
        )
    except UNVERIFIABLE as exc:
        raise CeremonyFailed(f"The passkey could not be verified: {exc}") from None
    # Conditional on the counter we checked against: two uses racing (a cloned key) cannot both pass.
    moved = Passkey.objects.filter(pk=passkey.pk, sign_count=passkey.sign_count).update(
        sign_count=verified.new_sign_count, last_used_at=timezone.now()
    )
    if not moved:
        raise CeremonyFailed("That passkey was used elsewhere at the same moment: try again.")
    return StepUp(approval_id=approval_id, shown_hash=row.shown_hash, user_id=user.pk, credential_id=passkey.credential_id)


def _issue(user, purpose: str, *, approval: Approval | None = None) -> bytes:
    now = timezone.now()
    Challenge.objects.filter(user=user, expires_at__lte=now).delete()  # this user's old ones, a bounded few
    # A script holding a session could otherwise add a row per request for as long as it likes.
    if Challenge.objects.filter(user=user, expires_at__gt=now).count() >= MAX_OPEN_CHALLENGES:
        raise CeremonyFailed("Too many passkey requests at once: wait a minute and try again.")
    challenge = secrets.token_bytes(32)
    Challenge.objects.create(
        user=user, purpose=purpose, challenge=bytes_to_base64url(challenge), approval=approval,
        shown_hash=approval.shown_hash if approval is not None else "", created_at=now,
        expires_at=now + timedelta(seconds=settings.HITL_STEP_UP_CHALLENGE_SECONDS),
    )
    return challenge


def _claim(user, client_data_json: bytes, purpose: str, *, approval_id: int | None = None) -> Challenge:
    """The challenge the browser signed, if we issued it to this user for this purpose (and
    approval), still fresh, and not used before: claimed now, whatever the verification says."""
    sent = bytes_to_base64url(parse_client_data_json(client_data_json).challenge)
    rows = Challenge.objects.filter(user=user, purpose=purpose, challenge=sent)
    if approval_id is not None:
        rows = rows.filter(approval_id=approval_id)
    row = rows.first()
    if row is None:
        raise CeremonyFailed("This passkey answer is not for this request: try again.")
    now = timezone.now()
    if not Challenge.objects.filter(pk=row.pk, used_at__isnull=True, expires_at__gt=now).update(used_at=now):
        raise CeremonyFailed("This passkey answer was used already, or came too late: try again.")
    return row


def _descriptors(user) -> list[PublicKeyCredentialDescriptor]:
    ids = user.passkeys.values_list("credential_id", flat=True)
    return [PublicKeyCredentialDescriptor(id=base64url_to_bytes(credential_id)) for credential_id in ids]


def _json(credential) -> str:
    """The browser's credential as the library parses it: a JSON object (a dict, or its text)."""
    if isinstance(credential, dict):
        return json.dumps(credential)
    if isinstance(credential, str):
        return credential
    raise CeremonyFailed("Send the passkey's answer as a JSON object.")
