"""Single-use signed tokens for a decision made outside the site: an email's link, a notification's
action. A token names one stored DecisionToken (its id and random nonce, signed with Django's
signing), which binds it to the approval, the version shown, whether the message showed the call
whole, the recipient and a lifetime of its own. Redeeming one decides through approvals.services as
its recipient: everything the decision service enforces (who may decide, four eyes, routes and
votes, critical confirmation, expiry, first decision wins, a cut message never approving) holds,
and the version decided is the one the message showed.

The approval's deadline is the decision service's, not the token's: a message sent before the
deadline was extended still decides until the new one, and a press after it is refused as late
and kept as a LateDecision, once per token (the late press spends it: one token cannot fill the
audit with late decisions).

Single use: the token is claimed by a conditional update in the same transaction as the decision,
so two presses decide at most once, and a decision refused (a critical call without its
confirmation, an approve through a message that showed the call cut) leaves it unclaimed for
another try.
"""
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.core import signing
from django.db import transaction
from django.utils import timezone

from . import services
from .models import Approval, DecisionToken

SALT = "hitl.approvals.decision-token"
DEFAULT_LIFETIME = timedelta(days=3)  # for an approval that never expires


class TokenInvalid(Exception):
    """Not a token this site signed, or signed for nothing that exists: a 403, nothing said about why."""


class TokenUsed(Exception):
    """This token already decided (or tried to decide) once."""

    def __init__(self, token: DecisionToken):
        self.token = token
        super().__init__("This link was already used.")


class TokenExpired(Exception):
    def __init__(self, token: DecisionToken):
        self.token = token
        super().__init__("This link has expired.")


def issue(approval: Approval, user, *, channel: str, complete: bool = True, lifetime: timedelta = DEFAULT_LIFETIME) -> str:
    """A token for `user` to decide `approval` at the version it shows now, through `channel`, for
    `lifetime` (the approval's own deadline, even extended, is enforced when it is redeemed).
    `complete` False: the message showed the call cut, so the token can reject, never approve."""
    now = timezone.now()
    expires_at = now + lifetime
    token = DecisionToken.objects.create(
        approval=approval, user=user, channel=channel, shown_hash=approval.shown_hash, complete=complete, nonce=secrets.token_hex(16),
        created_at=now, expires_at=expires_at,
    )
    return signing.dumps({"t": token.pk, "n": token.nonce}, salt=SALT, compress=False)


@dataclass
class Opened:
    """What a token names, read without deciding anything (a GET)."""

    token: DecisionToken
    approval: Approval

    @property
    def used(self) -> bool:
        return self.token.used_at is not None

    @property
    def expired(self) -> bool:
        return self.token.expires_at <= timezone.now()

    @property
    def changed(self) -> bool:
        """The call was edited since the message showed it: this token decides nothing."""
        return self.token.shown_hash != self.approval.shown_hash


def open_token(value: str) -> Opened:
    """The token and its approval (with the call), or TokenInvalid for anything this site did not sign."""
    try:
        data = signing.loads(value, salt=SALT)
        token_id, nonce = int(data["t"]), str(data["n"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        raise TokenInvalid from None
    token = DecisionToken.objects.select_related("user", "approval__tool_call", "approval__conversation__agent").filter(pk=token_id).first()
    if token is None or not secrets.compare_digest(token.nonce, nonce) or not token.user.is_active:
        raise TokenInvalid
    return Opened(token, token.approval)


def redeem(value: str, *, approve: bool, reason: str = "", confirmation: str = "") -> Approval:
    """Decide with a token, as its recipient, through its channel, at the version it was issued for.
    Raises TokenInvalid, TokenUsed, TokenExpired, and whatever services.decide raises (AlreadyDecided,
    ArgumentsChanged, NotAllowed (also when its recipient may no longer see the call), ConfirmationRequired, AlreadyVoted...)."""
    opened = open_token(value)
    token = opened.token
    if opened.used:
        raise TokenUsed(token)
    if opened.expired:
        raise TokenExpired(token)
    seen = {"shown_hash": token.shown_hash, "shown_whole": token.complete}
    try:
        if _past_its_deadline(opened.approval) and not _claimed(token):
            raise TokenUsed(token)  # its one late press was kept already
        # Outside the transaction first: a decision after the expiry is kept (a LateDecision) and
        # one through a message that showed the call cut refused, before the token is spent.
        services.check_decidable(token.approval_id, token.user, approve=approve, via=token.channel, **seen)
        with transaction.atomic():
            if not _claimed(token):
                raise TokenUsed(token)
            return services.decide(
                token.approval_id, user=token.user, approve=approve, via=token.channel, reason=reason, confirmation=confirmation, **seen
            )
    except Approval.DoesNotExist:
        # Its recipient may no longer see the call (a permission or a group taken away since): the
        # token gives no power of its own.
        raise services.NotAllowed("You may no longer decide this call.") from None


def _claimed(token: DecisionToken) -> bool:
    """Spend the token, if nobody did: the conditional update is the whole race between two presses."""
    return bool(DecisionToken.objects.filter(pk=token.pk, used_at__isnull=True).update(used_at=timezone.now()))


def _past_its_deadline(approval: Approval) -> bool:
    """Whether a decision now is late: the approval expired, or its deadline passed before the sweep."""
    if approval.status == Approval.Status.EXPIRED:
        return True
    return approval.status == Approval.Status.PENDING and approval.expires_at is not None and approval.expires_at <= timezone.now()
