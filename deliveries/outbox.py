"""The life of every channel's outbox rows, written once: claim a queued row (a conditional update,
so a retry and the sweep never both send it), send it through its channel, store what it showed or
why it failed (giving up after the channel's retries, or at once on a permanent refusal), update a
sent copy to its approval's outcome, rewrite one while it waits, and find what a lost task left."""
import logging
from datetime import timedelta

from django.db.models import F, Q
from django.utils import timezone

from approvals.models import Approval

from .models import Outbox

logger = logging.getLogger(__name__)
Status = Outbox.Status
Pending = Approval.Status.PENDING


class Sent:
    SENT, NOT_CLAIMED, CLOSED, FAILED = "sent", "not claimed", "closed", "failed"


class Failed(Exception):
    """The channel refused or could not be reached. `permanent`: a retry will not help (a blocked
    bot, a mailbox that does not exist, a message that is gone)."""

    def __init__(self, error: str, *, permanent: bool = False):
        super().__init__(error)
        self.error, self.permanent = error[:500], permanent


class Unwanted(Exception):
    """The row is no longer to be sent (its reader opted out, the device was removed, the deadline
    it warns of moved): it is closed unsent, with this as its note."""


def approval_of(row: Outbox) -> Approval:
    for name in row.approval_path.split("__"):
        row = getattr(row, name)
    return row


def _load(channel, model, **match):
    return model.objects.select_related(*channel.related(model)).prefetch_related(*channel.prefetched(model)).filter(**match).first()


def claim(channel, model, pk: int):
    """The queued row `pk`, claimed for one send (its attempts counted), or None if another worker
    has it, it was sent, or its retries are spent."""
    fresh = model.objects.filter(pk=pk, status=Status.QUEUED, attempts__lt=channel.max_attempts())
    row = _load(channel, model, pk=pk, status=Status.QUEUED, attempts__lt=channel.max_attempts())
    if row is None or not fresh.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return None
    row.attempts += 1
    return row


def send(channel, model, pk: int) -> str:
    """Send one queued row, if it is still wanted and its approval still waits."""
    row = claim(channel, model, pk)
    if row is None:
        return Sent.NOT_CLAIMED
    # Only this claim's outcome is written: a requeue meanwhile (an edit resets attempts) voids it.
    mine = model.objects.filter(pk=row.pk, attempts=row.attempts)
    try:
        if approval_of(row).status != Pending:
            raise Unwanted("")
        shown = channel.send(row) or {}
    except Unwanted as why:
        mine.filter(status=Status.QUEUED).update(status=Status.CLOSED, last_error=str(why)[:500])
        return Sent.CLOSED
    except Failed as exc:
        return _failed(channel, row, mine, exc)
    # By pk and claim, not status: a copy sent while its approval was decided (and its row closed
    # unsent) is marked sent, so the sweep updates it to the outcome.
    mine.update(status=Status.SENT, last_error="", updated_at=timezone.now(), **shown)
    return Sent.SENT


def _failed(channel, row, mine, exc: Failed) -> str:
    logger.warning("%s: sending %s failed: %s", channel.name, row, exc.error)
    gives_up = exc.permanent or row.attempts >= channel.max_attempts()
    mine.update(last_error=exc.error, updated_at=timezone.now())
    if gives_up:
        mine.filter(status=Status.QUEUED).update(status=Status.FAILED)
    return Sent.FAILED


def still_queued(model, pk: int) -> bool:
    """Whether a failed send is worth retrying (a permanent failure is not)."""
    return model.objects.filter(pk=pk, status=Status.QUEUED).exists()


def close(channel, pk: int) -> bool:
    """Update a sent copy to its approval's outcome (its buttons go); one never shown is closed
    unsent. True once it needs nothing more."""
    model = channel.delivery
    row = _load(channel, model, pk=pk)
    # Shown before, then queued again (an edit's or an extend's new send) or failed at that: its
    # reader still sees the earlier copy, with its actions, so it gets the outcome as a sent one does.
    shown_before = row is not None and row.status != Status.SENT and bool(row.shown_hash)
    if row is None or row.status == Status.CLOSED or (row.status == Status.FAILED and not shown_before):
        return True
    if approval_of(row).status == Pending:
        return True  # still waiting: its buttons keep working
    if row.status != Status.SENT:
        # Conditional: the queued resend, if it comes, finds nothing to claim.
        now = {"status": Status.SENT if shown_before else Status.CLOSED, "updated_at": timezone.now()}
        if model.objects.filter(pk=row.pk, status=row.status).update(**now) and not shown_before:
            return True
        row = _load(channel, model, pk=pk)  # sent meanwhile, or reopened for its outcome: update it
        if row.status != Status.SENT:
            return True
    try:
        channel.show_outcome(row)
    except Failed as exc:
        logger.warning("%s: updating %s to its outcome failed: %s", channel.name, row, exc.error)
        # A message that is gone has nothing left to update: closed, so the sweep leaves it.
        gone = {"status": Status.CLOSED} if exc.permanent else {}
        model.objects.filter(pk=row.pk).update(last_error=exc.error, updated_at=timezone.now(), **gone)
        return exc.permanent
    model.objects.filter(pk=row.pk, status=Status.SENT).update(status=Status.CLOSED, last_error="", updated_at=timezone.now())
    return True


def rewrite(channel, pk: int) -> bool:
    """Rewrite a sent copy of a waiting approval as it stands now (the votes cast, an edit's
    version with buttons for it, an extended deadline). True once nothing more is needed."""
    model = channel.delivery
    row = _load(channel, model, pk=pk, status=Status.SENT)
    if row is None or approval_of(row).status != Pending:
        return True  # closing updates it to the outcome
    try:
        shown = channel.rewrite(row)
    except Failed as exc:
        logger.warning("%s: rewriting %s failed: %s", channel.name, row, exc.error)
        model.objects.filter(pk=row.pk).update(last_error=exc.error, updated_at=timezone.now())
        return exc.permanent
    if shown is None:
        return True  # it shows the approval as it stands
    model.objects.filter(pk=row.pk, status=Status.SENT).update(last_error="", updated_at=timezone.now(), **shown)
    if Approval.objects.filter(pk=row.approval_id, status=Pending).exists():
        return True
    # Decided while this rewrite was on its way, and maybe closed before it put the buttons back:
    # the outcome has the last word.
    model.objects.filter(pk=row.pk, status=Status.CLOSED).update(status=Status.SENT)
    return close(channel, row.pk)


def requeue(model, rows) -> list[int]:
    """Send these rows again, afresh (an edit's new version, an extended deadline's request).
    attempts=0 also voids a send in flight: its final conditional update finds nothing to mark."""
    again = list(rows.values_list("pk", flat=True))
    model.objects.filter(pk__in=again).update(status=Status.QUEUED, attempts=0, last_error="", updated_at=timezone.now())
    return again


def retry_failed(channel, pks: list[int]) -> list[int]:
    """An operator's "send again" (the channel fixed): failed rows of calls still waiting, queued afresh."""
    model = channel.delivery
    return requeue(model, model.objects.filter(pk__in=pks, status=Status.FAILED, approval__status=Pending))


LOST_LAST_ATTEMPT = "Its last attempt never finished (its worker was lost): send it again if it should go."


class Lost:
    """What a sweep found that a lost task (a Redis restart, a killed worker) should have moved."""

    def __init__(self):
        self.to_send: list[tuple[type, int]] = []
        self.to_close: list[int] = []
        self.to_rewrite: list[int] = []


def lost(channel, *, now=None, limit: int = 200) -> Lost:
    """Rows untouched for the channel's stale seconds while a task should have moved them: queued
    rows of waiting approvals (to send again), open copies of decided ones (to close again), and
    copies behind their approval (to rewrite again). Stamped, so the next sweep leaves them to the
    tasks enqueued now. A queued row whose retries are spent (its last attempt lost) is failed."""
    now = now or timezone.now()
    before = now - timedelta(seconds=channel.stale_seconds())
    found = Lost()
    for model in channel.outboxes():
        pending = {f"{model.approval_path}__status": Pending}
        old = model.objects.filter(updated_at__lt=before)
        ids = list(old.filter(status=Status.QUEUED, attempts__lt=channel.max_attempts(), **pending).values_list("pk", flat=True)[:limit])
        model.objects.filter(pk__in=ids).update(updated_at=now)
        found.to_send += [(model, pk) for pk in ids]
        # Its last attempt was claimed and never finished (a killed worker, a send that raised): no
        # send claims it again, so failed, where the admin's "send again" reaches it.
        old.filter(status=Status.QUEUED, attempts__gte=channel.max_attempts(), **pending).update(
            status=Status.FAILED, last_error=LOST_LAST_ATTEMPT, updated_at=now,
        )
    old = channel.delivery.objects.filter(updated_at__lt=before)
    found.to_close = list(old.filter(status__in=(Status.QUEUED, Status.SENT)).exclude(approval__status=Pending).values_list("pk", flat=True)[:limit])
    found.to_rewrite = list(channel.behind(old.filter(status=Status.SENT, approval__status=Pending)).values_list("pk", flat=True)[:limit])
    channel.delivery.objects.filter(pk__in=found.to_close + found.to_rewrite).update(updated_at=now)
    return found


def unwarned(channel, *, now=None):
    """Sent copies of warned, still waiting approvals whose reader was not warned of the deadline
    (the worker that warned died before its signal, the copy was sent after the warning, or the
    deadline was extended since)."""
    now = now or timezone.now()
    return channel.requests(channel.delivery.objects.filter(
        status=Status.SENT, approval__status=Pending, approval__warned_at__isnull=False, approval__expires_at__gt=now,
    )).filter(Q(warned_for__isnull=True) | ~Q(warned_for=F("approval__expires_at")))
