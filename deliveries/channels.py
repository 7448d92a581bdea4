"""A channel is one way of reaching a person (Slack, Telegram, email, push). Each is a small
subclass of Channel, registered by its app, that says who its readers are and how to send, update
and rewrite a message in its wire format; everything else (the outbox, retries, the sweep,
reminders, warnings before expiry, what the decision service's signals do) is this base's, so
every channel keeps the same promises. In the manner of healthchecks' integrations on one Transport."""
from django.conf import settings
from django.db.models import Q, QuerySet

from approvals.deciders import routing, votes
from approvals.models import Approval

from .models import Delivery, Outbox

Status = Outbox.Status
Pending = Approval.Status.PENDING
_registry: dict[str, "Channel"] = {}


def register(channel: "Channel") -> None:
    _registry[channel.name] = channel


def get(name: str) -> "Channel":
    return _registry[name]


def registered() -> list["Channel"]:
    return list(_registry.values())


class Channel:
    name = ""  # the registry's key, and what its tasks carry
    delivery: type[Delivery]  # one approval shown to one reader
    replies: tuple[type[Outbox], ...] = ()  # follow-ups sent in a request's thread (reminders, warnings)
    settings_prefix = ""  # HITL_<X>_RETRIES and HITL_<X>_STALE_SECONDS
    reader = "user"  # the path from a delivery to the user who reads it
    # A sent copy is rewritten in place when a vote is cast, the call edited or its deadline
    # extended (Slack, Telegram). Otherwise (a mail, a notification) an edit sends the new version again.
    rewrites_in_place = True

    # What the channel says. ------------------------------------------------------------------
    def enabled(self) -> bool:
        raise NotImplementedError

    def recipients(self, approval: Approval) -> list:
        """Whom a pending approval goes to: the channel's identities of routing.deciders(approval)."""
        raise NotImplementedError

    def create(self, approval: Approval, recipient) -> tuple[Delivery, bool]:
        """The delivery of `approval` to `recipient` (get_or_create: one each)."""
        raise NotImplementedError

    def send(self, row: Outbox) -> dict:
        """Send a claimed row (a delivery or a reply) in the wire format; the fields to store with it
        (what it showed). Raise outbox.Failed if the channel refused, outbox.Unwanted to close it unsent."""
        raise NotImplementedError

    def show_outcome(self, row: Delivery) -> None:
        """Update a sent copy to its approval's outcome (its buttons go). Raise outbox.Failed."""

    def rewrite(self, row: Delivery) -> dict | None:
        """Rewrite a sent copy of a waiting approval as it stands; the fields to store, or None if it
        shows it already. Raise outbox.Failed."""
        return None

    def queue_warning(self, row: Delivery, deadline) -> list[tuple[type, int]]:
        """The warning (a reply, or a row of its own) a sent copy gets when `deadline` is near: the
        rows made (none if it was made before)."""
        return []

    def queue_reminder(self, row: Delivery) -> list[tuple[type, int]]:
        """The one "still waiting" a sent copy gets when its route's reminder is due: the rows made."""
        return []

    def related(self, model) -> tuple[str, ...]:
        """What to load with a row of `model` (select_related) for send, close and rewrite."""
        return ()

    def prefetched(self, model) -> tuple[str, ...]:
        return ()

    def requests(self, deliveries: QuerySet) -> QuerySet:
        """The deliveries that ask for the decision (a channel that keeps its warnings beside its
        requests, in one table, leaves the warnings out)."""
        return deliveries

    def behind(self, sent: QuerySet) -> QuerySet:
        """The sent copies whose text is behind their approval (for the sweep to rewrite again)."""
        return sent.none()

    def sweep(self) -> None:
        """Anything else the channel keeps tidy on each sweep (seen signatures, say)."""

    # Settings. --------------------------------------------------------------------------------
    def max_attempts(self) -> int:
        return getattr(settings, f"{self.settings_prefix}_RETRIES") + 1

    def stale_seconds(self) -> float:
        return getattr(settings, f"{self.settings_prefix}_STALE_SECONDS")

    def outboxes(self) -> tuple[type[Outbox], ...]:
        return (self.delivery, *self.replies)

    # The life the decision service's signals drive (deliveries.receivers). ------------------------
    def queue(self, approval: Approval) -> list[int]:
        """A queued delivery for each reader of a pending approval not sent it yet; the ids to send."""
        if approval.status != Pending:
            return []
        rows = [self.create(approval, recipient) for recipient in self.recipients(approval)]
        return [row.pk for row, created in rows if created]

    def sent(self, approval: Approval) -> QuerySet:
        return self.requests(self.delivery.objects.filter(approval=approval, status=Status.SENT))

    def open_ids(self, approvals) -> list[int]:
        """The copies a decision updates: queued or sent, and failed ones shown before (a resend
        failed: the reader still sees the earlier copy)."""
        open_ = Q(status__in=(Status.QUEUED, Status.SENT)) | (Q(status=Status.FAILED) & ~Q(shown_hash=""))
        return list(self.delivery.objects.filter(open_, approval__in=[a.pk for a in approvals]).values_list("pk", flat=True))

    def queue_warnings(self, approval: Approval) -> list[tuple[type, int]]:
        """A warning for each sent copy of a pending approval whose reader was not warned of its
        deadline; the rows to send. Once per deadline: an extended approval is warned of its new one."""
        if approval.status != Pending or approval.expires_at is None:
            return []
        made = []
        rows = list(self.sent(approval).exclude(warned_for=approval.expires_at))
        for row in rows:
            made += self.queue_warning(row, approval.expires_at)
        self.delivery.objects.filter(pk__in=[row.pk for row in rows]).update(warned_for=approval.expires_at)
        return made

    def queue_reminders(self, approval: Approval) -> list[tuple[type, int]]:
        """A reminder for each sent copy whose reader may still decide and has not voted yet; the
        rows to send."""
        if approval.status != Pending:
            return []
        counted = votes.counted(approval)
        voted = {vote.user_id for vote in counted} | {vote.voter_id for vote in counted}
        deciders = [user.pk for user in routing.deciders(approval)]
        made = []
        readers = {f"{self.reader}_id__in": deciders}
        for row in self.sent(approval).filter(**readers).exclude(**{f"{self.reader}_id__in": voted}):
            made += self.queue_reminder(row)
        return made

    def requeue_edited(self, approval: Approval) -> list[int]:
        """After an edit, on a channel that cannot rewrite: each reader who may still decide and was
        shown the old version is sent the new one (the old links decide nothing now)."""
        from .outbox import requeue

        readers = [getattr(recipient, "pk", recipient) for recipient in self.recipients(approval)]
        shown = self.requests(self.delivery.objects.filter(approval=approval, status__in=(Status.SENT, Status.QUEUED)))
        shown = shown.filter(**{f"{self.recipient_field}_id__in": readers}).exclude(shown_hash=approval.shown_hash)
        return requeue(self.delivery, shown)

    def extended(self, approval: Approval) -> None:
        """Its deadline was extended: every sent copy shows the new one (a channel that cannot
        rewrite a copy overrides this)."""
        from .tasks import rewrite_later

        if self.rewrites_in_place:
            rewrite_later(self, list(self.sent(approval).values_list("pk", flat=True)))

    # Which field of a delivery holds its recipient (requeue_edited matches recipients by it).
    recipient_field = "user"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
