"""Which people get a request on Slack, and the life of each message: queued, sent (claimed by a
conditional update, so a retry and the sweep never both send), rewritten while it waits (votes
cast, an edit of the call), then updated to the outcome."""
import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F, Q
from django.utils import timezone

from approvals import routing
from approvals.models import Approval

from . import blocks, client
from .models import SentVersion, SlackAccount, SlackMessage

logger = logging.getLogger(__name__)
Status = SlackMessage.Status
Pending = Approval.Status.PENDING
# What a message's blocks read with its approval: the tool call, the agent, who decided, the votes, the route.
RELATED = (
    "approval__tool_call", "approval__conversation__agent", "approval__requested_by", "approval__decided_by",
    "approval__extended_by", "account__user",
)
VOTES = ("approval__votes__user", "approval__votes__on_behalf_of", "approval__route__approvers", "approval__route__escalate_to")


class Sent:
    SENT, NOT_CLAIMED, CLOSED, FAILED = "sent", "not claimed", "closed", "failed"


def recipients(approval: Approval) -> list[SlackAccount]:
    """The linked accounts of those who may decide it (approvals.routing.deciders)."""
    accounts = SlackAccount.objects.select_related("user").filter(user__is_active=True)
    return list(accounts.filter(user_id__in=[user.pk for user in routing.deciders(approval)]).order_by("user_id"))


def queue(approval: Approval) -> list[int]:
    """A queued message for each recipient of a pending approval not sent it yet; the ids to send."""
    if not client.enabled() or approval.status != Pending:
        return []
    rows = [SlackMessage.objects.get_or_create(approval=approval, account=account) for account in recipients(approval)]
    return [row.pk for row, created in rows if created]


def _row(message_id: int, **match) -> SlackMessage | None:
    return SlackMessage.objects.select_related(*RELATED).prefetch_related(*VOTES).filter(pk=message_id, **match).first()


def send(message_id: int) -> str:
    """Send one queued message, if it is still to be sent and its approval still waits."""
    claimed = SlackMessage.objects.filter(pk=message_id, status=Status.QUEUED, attempts__lt=max_attempts())
    row = _row(message_id, status=Status.QUEUED, attempts__lt=max_attempts())
    if row is None or not claimed.filter(attempts=row.attempts).update(attempts=row.attempts + 1, updated_at=timezone.now()):
        return Sent.NOT_CLAIMED
    approval = row.approval
    if approval.status != Pending:
        SlackMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.CLOSED)
        return Sent.CLOSED
    # Each send is a version of its own: a copy Slack delivered though its answer was lost keeps
    # deciding only what it showed, and approving only if it showed it whole.
    view = blocks.shown(approval)
    version = SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=view.complete)
    text, content = blocks.request(approval, version.token, view)
    try:
        channel, ts = client.post(row.account.slack_user_id, text, content)
    except client.ERRORS as exc:
        return _failed(row, exc, f"sending approval {approval.pk}")
    SlackMessage.objects.filter(pk=row.pk).update(
        status=Status.SENT, channel=channel, ts=ts, last_error="", shown_hash=approval.shown_hash,
        expires_seen=approval.expires_at, votes_seen=len(approval.votes.all()), updated_at=timezone.now(),
    )
    return Sent.SENT


def _failed(row: SlackMessage, exc: Exception, doing: str) -> str:
    error = client.error_code(exc)[:500]
    logger.warning("slack: %s to %s failed: %s", doing, row.account.slack_user_id, error)
    gives_up = client.is_permanent(exc) or row.attempts + 1 >= max_attempts()
    SlackMessage.objects.filter(pk=row.pk).update(last_error=error, updated_at=timezone.now())
    if gives_up:
        SlackMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.FAILED)
    return Sent.FAILED


def close(message_id: int) -> bool:
    """Update a sent message to its approval's outcome (its buttons go); a message never sent is
    closed unsent. True once the message needs nothing more."""
    row = _row(message_id)
    if row is None or row.status in (Status.CLOSED, Status.FAILED):
        return True
    approval = row.approval
    if approval.status == Pending:
        return True  # still waiting: its buttons keep working
    if row.status == Status.QUEUED:
        if SlackMessage.objects.filter(pk=row.pk, status=Status.QUEUED).update(status=Status.CLOSED):
            return True
        row.refresh_from_db()  # sent meanwhile: update it
    was_whole = bool(row.versions.order_by("-pk").values_list("complete", flat=True).first())
    try:
        client.update(row.channel, row.ts, *blocks.outcome(approval, was_whole=was_whole))
    except client.ERRORS as exc:
        logger.warning("slack: updating the message of approval %s failed: %s", approval.pk, client.error_code(exc))
        SlackMessage.objects.filter(pk=row.pk).update(last_error=client.error_code(exc)[:500], updated_at=timezone.now())
        return client.is_permanent(exc)  # a message that is gone has nothing left to update
    SlackMessage.objects.filter(pk=row.pk, status=Status.SENT).update(status=Status.CLOSED, last_error="", updated_at=timezone.now())
    return True


def to_refresh(approval: Approval) -> list[int]:
    """The sent messages of a waiting approval to rewrite (a vote was cast, the call was edited, its
    deadline extended)."""
    if not client.enabled():
        return []
    return list(SlackMessage.objects.filter(approval=approval.pk, status=Status.SENT).values_list("pk", flat=True))


def refresh(message_id: int) -> bool:
    """Rewrite a sent message of a waiting approval as it stands now: the votes cast, the version
    an edit made (with buttons for that version; the old ones decide nothing), its deadline. A reader who may no
    longer decide it (an edit handed it to approvers) keeps no buttons, and still gets the outcome.
    True once nothing more is needed."""
    row = _row(message_id, status=Status.SENT)
    if row is None or row.approval.status != Pending:
        return True  # closing updates it to the outcome
    approval = row.approval
    seen = len(approval.votes.all())
    if row.shown_hash == approval.shown_hash and seen <= row.votes_seen and row.expires_seen == approval.expires_at:
        return True
    if row.account.user_id not in {user.pk for user in routing.deciders(approval)}:
        content = blocks.not_yours(approval)
    else:
        view = blocks.shown(approval)
        version = row.versions.filter(shown_hash=approval.shown_hash, complete=view.complete).order_by("-pk").first()
        version = version or SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=view.complete)
        content = blocks.request(approval, version.token, view)
    try:
        client.update(row.channel, row.ts, *content)
    except client.ERRORS as exc:
        logger.warning("slack: rewriting the message of approval %s failed: %s", approval.pk, client.error_code(exc))
        SlackMessage.objects.filter(pk=row.pk).update(last_error=client.error_code(exc)[:500], updated_at=timezone.now())
        return client.is_permanent(exc)
    SlackMessage.objects.filter(pk=row.pk, status=Status.SENT).update(
        shown_hash=approval.shown_hash, votes_seen=seen, expires_seen=approval.expires_at, last_error="", updated_at=timezone.now()
    )
    if Approval.objects.filter(pk=approval.pk, status=Pending).exists():
        return True
    # Decided while this rewrite was on its way, and maybe closed before it put the buttons back:
    # the outcome has the last word.
    SlackMessage.objects.filter(pk=row.pk, status=Status.CLOSED).update(status=Status.SENT)
    return close(row.pk)


def lost(*, now=None, limit: int = 200) -> tuple[list[int], list[int], list[int]]:
    """(messages to send again, to close again, to rewrite again): untouched for
    HITL_SLACK_STALE_SECONDS while their task should have moved them (a Redis restart, a killed worker)."""
    now = now or timezone.now()
    old = SlackMessage.objects.filter(updated_at__lt=now - timedelta(seconds=settings.HITL_SLACK_STALE_SECONDS))
    to_send = old.filter(status=Status.QUEUED, attempts__lt=max_attempts(), approval__status=Pending)
    to_close = old.filter(Q(status=Status.SENT) | Q(status=Status.QUEUED)).exclude(approval__status=Pending)
    behind = old.filter(status=Status.SENT, approval__status=Pending).annotate(votes=Count("approval__votes")).filter(
        Q(votes__gt=F("votes_seen"))
        | (Q(approval__edited_arguments__isnull=False) & ~Q(shown_hash=F("approval__edited_arguments_hash")))
        | (Q(approval__extended_at__isnull=False) & (Q(expires_seen__isnull=True) | ~Q(expires_seen=F("approval__expires_at"))))
    )
    resend = list(to_send.values_list("pk", flat=True)[:limit])
    reclose = list(to_close.values_list("pk", flat=True)[:limit])
    rewrite = list(behind.values_list("pk", flat=True)[:limit])
    # Stamped, so the next sweep leaves them to the tasks enqueued now.
    SlackMessage.objects.filter(pk__in=resend + reclose + rewrite).update(updated_at=now)
    return resend, reclose, rewrite


def max_attempts() -> int:
    return settings.HITL_SLACK_RETRIES + 1
