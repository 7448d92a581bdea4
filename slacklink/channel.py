"""Slack as a channel on the deliveries base: who gets a request (the linked accounts of those who
may decide it), and the wire format: a Block Kit message posted to their direct messages, rewritten
in place while it waits (the votes cast, an edit's version, an extended deadline), updated to the
outcome, and replies in its thread (the reminder, the warning with Extend). Each send or rewrite
that shows a version renders it with a token of its own (SentVersion): a press decides that version
or nothing, and approves only if that rendering showed the call whole."""
from contextlib import contextmanager

from django.db.models import Count, F, Q, QuerySet

from approvals.deciders import routing
from approvals.models import Approval
from deliveries.channels import Channel
from deliveries.outbox import Failed, Unwanted

from . import blocks, client, verification
from .models import Reminder, SentVersion, SlackAccount, SlackMessage

# What a message's blocks read with its approval: the tool call, the agent, who decided, the votes, the route.
RELATED = (
    "approval__tool_call", "approval__conversation__agent", "approval__requested_by", "approval__decided_by",
    "approval__extended_by", "account__user",
)
VOTES = ("approval__votes__user", "approval__votes__on_behalf_of", "approval__route__approvers", "approval__route__escalate_to")


class SlackChannel(Channel):
    name = "slack"
    delivery = SlackMessage
    replies = (Reminder,)
    settings_prefix = "HITL_SLACK"
    reader = "account__user"  # whose vote spares a copy its reminder
    recipient_field = "account"

    def enabled(self) -> bool:
        return client.enabled()

    def recipients(self, approval: Approval) -> list[SlackAccount]:
        """The linked accounts of those who may decide it (approvals.deciders.routing.deciders)."""
        accounts = SlackAccount.objects.select_related("user").filter(user__is_active=True)
        return list(accounts.filter(user_id__in=[user.pk for user in routing.deciders(approval)]).order_by("user_id"))

    def create(self, approval: Approval, account: SlackAccount) -> tuple[SlackMessage, bool]:
        return SlackMessage.objects.get_or_create(approval=approval, account=account)

    def related(self, model) -> tuple[str, ...]:
        return RELATED if model is SlackMessage else tuple(f"message__{name}" for name in RELATED)

    def prefetched(self, model) -> tuple[str, ...]:
        return VOTES if model is SlackMessage else tuple(f"message__{name}" for name in VOTES)

    def send(self, row: SlackMessage | Reminder) -> dict:
        if isinstance(row, Reminder):
            return self._reply(row)
        approval = row.approval
        # Each send is a version of its own: a copy Slack delivered though its answer was lost keeps
        # deciding only what it showed, and approving only if it showed it whole.
        view = blocks.shown(approval)
        version = SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=view.complete)
        text, content = blocks.request(approval, version.token, view)
        with _refusals():
            channel, ts = client.post(row.account.slack_user_id, text, content)
        return {
            "channel": channel, "ts": ts, "shown_hash": approval.shown_hash, "complete": view.complete,
            "expires_seen": approval.expires_at, "votes_seen": len(approval.votes.all()),
        }

    def _reply(self, reminder: Reminder) -> dict:
        row, approval = reminder.message, reminder.message.approval
        if reminder.kind == Reminder.Kind.EXPIRING and reminder.deadline != approval.expires_at:
            raise Unwanted("Its deadline was extended: the new deadline gets a warning of its own.")
        with _refusals():
            if reminder.kind == Reminder.Kind.EXPIRING:
                client.reply(row.channel, row.ts, *blocks.warning(approval, row.versions.order_by("-pk").first().token))
            else:
                client.reply(row.channel, row.ts, blocks.reminder(approval))
        return {}

    def show_outcome(self, row: SlackMessage) -> None:
        with _refusals():
            client.update(row.channel, row.ts, *blocks.outcome(row.approval, was_whole=row.complete))

    def rewrite(self, row: SlackMessage) -> dict | None:
        """The message as its approval stands. A reader who may no longer decide it (an edit handed
        it to approvers) keeps no buttons, and still gets the outcome."""
        approval = row.approval
        seen = len(approval.votes.all())
        if row.shown_hash == approval.shown_hash and seen <= row.votes_seen and row.expires_seen == approval.expires_at:
            return None
        shown = {"shown_hash": approval.shown_hash, "votes_seen": seen, "expires_seen": approval.expires_at}
        if row.account.user_id not in {user.pk for user in routing.deciders(approval)}:
            content = blocks.not_yours(approval)  # no version: `complete` stays what its last rendering showed
        else:
            view = blocks.shown(approval)
            version = row.versions.filter(shown_hash=approval.shown_hash, complete=view.complete).order_by("-pk").first()
            version = version or SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=view.complete)
            content = blocks.request(approval, version.token, view)
            shown["complete"] = view.complete
        with _refusals():
            client.update(row.channel, row.ts, *content)
        return shown

    def queue_warning(self, row: SlackMessage, deadline) -> list[tuple[type, int]]:
        warning, created = Reminder.objects.get_or_create(message=row, kind=Reminder.Kind.EXPIRING, deadline=deadline)
        return [(Reminder, warning.pk)] if created else []

    def queue_reminder(self, row: SlackMessage) -> list[tuple[type, int]]:
        reminder, created = Reminder.objects.get_or_create(message=row, kind=Reminder.Kind.STILL_WAITING)
        return [(Reminder, reminder.pk)] if created else []

    def behind(self, sent: QuerySet) -> QuerySet:
        """Copies whose text counts fewer votes than were cast, shows a version an edit replaced, or
        a deadline an extend moved."""
        return sent.annotate(votes=Count("approval__votes")).filter(
            Q(votes__gt=F("votes_seen"))
            | (Q(approval__edited_arguments__isnull=False) & ~Q(shown_hash=F("approval__edited_arguments_hash")))
            | (Q(approval__extended_at__isnull=False) & (Q(expires_seen__isnull=True) | ~Q(expires_seen=F("approval__expires_at"))))
        )

    def sweep(self) -> None:
        verification.forget_old()


@contextmanager
def _refusals():
    """Slack's refusals and a Slack out of reach, as the base's Failed (permanent when Slack says a
    retry will not help: the person or the channel is gone, the blocks are wrong)."""
    try:
        yield
    except client.ERRORS as exc:
        raise Failed(client.error_code(exc), permanent=client.is_permanent(exc)) from None


CHANNEL = SlackChannel()
