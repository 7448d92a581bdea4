"""Web Push as a channel on the deliveries base: whose devices get a notification (the devices of
those who may decide), what it carries (texts), and the single-use tokens of its actions. A push
cannot be rewritten in place: an edit sends the new version under the same tag, a warning replaces
the request as its deadline nears, an extend sends the request again, and the outcome replaces
whichever the device shows."""
from django.contrib.auth import get_user_model
from django.core import signing
from django.utils import timezone

from approvals import tokens
from approvals.deciders import routing
from approvals.models import Approval
from approvals.summary import summarize
from deliveries.channels import Channel
from deliveries.outbox import Failed, Unwanted, requeue
from deliveries.tasks import send_later

from . import pushservice, texts
from .models import PushNotification, PushSubscription

Status, Kind = PushNotification.Status, PushNotification.Kind
DEFAULT_TTL = 24 * 3600
EXTEND_SALT = "pushlink.extend"
GONE_NOTE = " (the push service forgot this device: removed)"


class PushChannel(Channel):
    name = "push"
    delivery = PushNotification
    settings_prefix = "HITL_PUSH"
    rewrites_in_place = False
    recipient_field = "subscription"  # a device is the recipient: one person may have several

    def enabled(self) -> bool:
        return pushservice.enabled()

    def recipients(self, approval: Approval) -> list[PushSubscription]:
        """The devices of those who may decide it (approvals.deciders.routing.deciders)."""
        users = [user.pk for user in routing.deciders(approval)]
        return list(PushSubscription.objects.filter(user_id__in=users, user__is_active=True).order_by("user_id", "pk"))

    def create(self, approval: Approval, subscription: PushSubscription):
        return PushNotification.objects.get_or_create(
            approval=approval, subscription=subscription, kind=Kind.REQUEST,
            defaults={"user_id": subscription.user_id, "device": subscription.device},
        )

    def requests(self, deliveries):
        # The warnings live in the same table: only the requests ask for the decision.
        return deliveries.filter(kind=Kind.REQUEST)

    def queue_warning(self, row: PushNotification, deadline) -> list:
        """The warning row of a device shown the request, made once: it replaces the request (same tag)."""
        if row.subscription_id is None:
            return []  # the device was removed
        warning, made = PushNotification.objects.get_or_create(
            approval_id=row.approval_id, subscription_id=row.subscription_id, kind=Kind.WARNING,
            defaults={"user_id": row.user_id, "device": row.device},
        )
        return [(PushNotification, warning.pk)] if made else []

    def extended(self, approval: Approval) -> None:
        # A push cannot be rewritten: the old deadline's warnings are forgotten (the new deadline
        # warns anew), and each device shown the request gets it again in place of the warning,
        # with its actions.
        if approval.status != Approval.Status.PENDING:
            return
        PushNotification.objects.filter(approval=approval, kind=Kind.WARNING).delete()
        send_later(self, requeue(PushNotification, self.sent(approval)))

    def related(self, model) -> tuple[str, ...]:
        return ("subscription", "user", "approval__tool_call", "approval__conversation__agent", "approval__requested_by", "approval__decided_by")

    def send(self, row: PushNotification) -> dict:
        approval, subscription = row.approval, row.subscription
        if subscription is None:
            raise Unwanted("The device was removed.")
        if row.kind == Kind.WARNING and ttl(approval) == 0:
            raise Unwanted("Its deadline passed.")
        summary = summarize(approval)
        whole = texts.shows_whole(summary)
        if row.kind == Kind.WARNING:
            payload = texts.warning(approval, summary, extend_token(row) if approval.extended_at is None else None)
        else:
            payload = texts.request(approval, summary, offered_tokens(approval, row.user, whole=whole))
        try:
            pushservice.push(subscription.subscription_info(), payload, ttl=ttl(approval), topic=texts.tag(approval))
        except pushservice.PushFailed as exc:
            if exc.is_gone:
                _remove(subscription)
                raise Failed(f"{exc}{GONE_NOTE}", permanent=True) from None
            raise Failed(str(exc), permanent=not exc.is_transient) from None
        return {"shown_hash": approval.shown_hash, "complete": whole and row.kind == Kind.REQUEST}

    def show_outcome(self, row: PushNotification) -> None:
        """The outcome, under the approval's tag, in place of what the device shows. A warning's row
        pushes nothing: its request's row pushes the outcome, which replaces the warning too."""
        if row.kind == Kind.WARNING or row.subscription is None:
            return
        try:
            pushservice.push(row.subscription.subscription_info(), texts.decided(row.approval), ttl=DEFAULT_TTL, topic=texts.tag(row.approval))
        except pushservice.PushFailed as exc:
            if not exc.is_gone:
                raise Failed(str(exc), permanent=not exc.is_transient) from None
            # Forgotten by the push service: nothing shows it any more, so it is closed now, its error kept.
            _remove(row.subscription)
            PushNotification.objects.filter(pk=row.pk, status=Status.SENT).update(status=Status.CLOSED, last_error=str(exc)[:500])


def offered_tokens(approval: Approval, user, *, whole: bool) -> dict[str, str] | None:
    """The actions' tokens: none for a call decided on the site only (texts.offers_actions); a
    reject token always (issued as cut: it can reject, never approve, whatever POSTs it); an approve
    token only when the notification shows the whole call."""
    if not texts.offers_actions(approval):
        return None
    offered = {"reject": tokens.issue(approval, user, channel="push", complete=False)}
    if whole:
        offered["approve"] = tokens.issue(approval, user, channel="push", complete=True)
    return offered


def extend_token(row: PushNotification) -> str:
    """The warning's Extend: names the approval and the warned device's owner, who extends it via push; signed."""
    return signing.dumps({"a": row.approval_id, "u": row.user_id}, salt=EXTEND_SALT, compress=False)


def open_extend_token(value: str) -> tuple[int, object] | None:
    """(approval id, user) an Extend token names, if this site signed it and that person is active."""
    try:
        data = signing.loads(value, salt=EXTEND_SALT, max_age=tokens.DEFAULT_LIFETIME)
        approval_id, user_id = int(data["a"]), int(data["u"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        return None
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    return (approval_id, user) if user is not None else None


def ttl(approval: Approval) -> int:
    """How long the push service keeps it for an offline device: no longer than the approval waits."""
    if approval.expires_at is None:
        return DEFAULT_TTL
    return max(int((approval.expires_at - timezone.now()).total_seconds()), 0)


def _remove(subscription: PushSubscription) -> None:
    PushSubscription.objects.filter(pk=subscription.pk).delete()


CHANNEL = PushChannel()
