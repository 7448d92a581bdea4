"""Telegram as a channel on the deliveries base: who gets a request (the linked accounts of those
who may decide it), and the Bot API's side of each row: the request, with buttons for the version
it shows; a reminder or an expiry warning, as a reply to it; the edit to the outcome; the rewrite
in place while it waits (the votes cast, an edit's version with buttons of its own, a new
deadline). What a press does is read in updates.py."""
import logging
from contextlib import contextmanager

from django.db.models import Count, F, Q
from django.utils import timezone

from approvals.deciders import routing
from approvals.models import Approval
from deliveries.channels import Channel
from deliveries.outbox import Failed, Unwanted

from . import bot, texts
from .models import ApprovalMessage, ExpiryWarning, Reminder, SentVersion, TelegramAccount

logger = logging.getLogger(__name__)
Pending = Approval.Status.PENDING
Status = ApprovalMessage.Status

# A message's text counts its approval's votes (approvals.deciders.votes.summary) and names its route's
# groups: read with it, a query each.
VOTES = ("approval__votes__user", "approval__votes__on_behalf_of", "approval__route__approvers", "approval__route__escalate_to")
# What approvals.summary and the text read of a message's approval (and its outcome), in the same query.
SHOWN = ("approval__tool_call", "approval__conversation__agent", "approval__requested_by", "approval__extended_by", "approval__decided_by")


@contextmanager
def refusals():
    """The Bot API's refusals as the outbox reads them. A 403 (the bot blocked, the chat gone) or a
    400 (a message that is gone, or one Telegram will never take) stays so: a retry will not help."""
    try:
        yield
    except (bot.Forbidden, bot.BadRequest) as exc:
        raise Failed(f"{type(exc).__name__}: {exc}", permanent=True) from None
    except bot.TelegramError as exc:
        raise Failed(f"{type(exc).__name__}: {exc}") from None


class TelegramChannel(Channel):
    name = "telegram"
    delivery = ApprovalMessage
    replies = (Reminder, ExpiryWarning)
    settings_prefix = "HITL_TELEGRAM"
    # A message goes to a linked account: its user is the reader whose vote spares it a reminder.
    recipient_field, reader = "account", "account__user"

    def enabled(self) -> bool:
        return bot.enabled()

    def recipients(self, approval: Approval) -> list[TelegramAccount]:
        """The linked accounts of those who may decide it (approvals.deciders.routing.deciders), active ones only."""
        deciders = [user.pk for user in routing.deciders(approval)]
        linked = TelegramAccount.objects.filter(user_id__in=deciders, user__is_active=True)
        return list(linked.select_related("user").order_by("user_id"))

    def create(self, approval: Approval, account: TelegramAccount):
        return ApprovalMessage.objects.get_or_create(approval=approval, account=account, defaults={"chat_id": account.chat_id})

    def related(self, model) -> tuple[str, ...]:
        return SHOWN if model is ApprovalMessage else tuple(f"message__{name}" for name in SHOWN)

    def prefetched(self, model) -> tuple[str, ...]:
        return VOTES if model is ApprovalMessage else tuple(f"message__{name}" for name in VOTES)

    def queue_warning(self, row: ApprovalMessage, deadline) -> list:
        # One per message and deadline (the constraint holds it even for two receivers at once).
        warning, made = ExpiryWarning.objects.get_or_create(message=row, expires_at=deadline)
        return [(ExpiryWarning, warning.pk)] if made else []

    def queue_reminder(self, row: ApprovalMessage) -> list:
        reminder, made = Reminder.objects.get_or_create(message=row)
        return [(Reminder, reminder.pk)] if made else []

    def behind(self, sent):
        """Copies counting fewer votes than were cast, or showing a version an edit replaced: their
        rewrite was lost with its task."""
        votes = sent.filter(approval__quorum__gt=1).annotate(votes=Count("approval__votes")).filter(votes__gt=F("votes_seen"))
        edited = sent.exclude(approval__edited_arguments_hash="").exclude(shown_hash=F("approval__edited_arguments_hash"))
        return sent.filter(Q(pk__in=votes.values("pk")) | Q(pk__in=edited.values("pk")))

    # The wire. ---------------------------------------------------------------------------------
    def send(self, row) -> dict:
        if isinstance(row, Reminder):
            self._reply(row, texts.reminder(row.message.approval))
            return {}
        if isinstance(row, ExpiryWarning):
            return self._warn(row)
        approval = row.approval
        # Each send is a version of its own: a copy Telegram delivered though the send failed here (a
        # timeout) keeps deciding only what it showed, whatever a later send of an edit shows.
        shown = texts.request(approval)
        version = SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=shown.complete)
        with refusals():
            sent_id = bot.send(row.chat_id, shown.text, texts.buttons(approval, version.token, complete=shown.complete))
        return {"message_id": sent_id, **_written(approval, shown)}

    def show_outcome(self, row: ApprovalMessage) -> None:
        with refusals():
            bot.edit(row.chat_id, row.message_id, texts.outcome_text(row.approval))
        self._retire_warnings(row)

    def rewrite(self, row: ApprovalMessage) -> dict:
        """The request as it stands, in place. Its buttons decide what its text shows now: the
        version of an earlier send if it showed the same, else a new one (after an edit, whose new
        token the old buttons lack: they decide nothing)."""
        approval = row.approval
        shown = texts.request(approval)
        if row.account.user_id in {user.pk for user in routing.deciders(approval)}:
            version = row.versions.filter(shown_hash=approval.shown_hash, complete=shown.complete).order_by("-pk").first()
            version = version or SentVersion.objects.create(message=row, shown_hash=approval.shown_hash, complete=shown.complete)
            text, buttons = shown.text, texts.buttons(approval, version.token, complete=shown.complete)
        else:  # an edit handed it to other approvers: no buttons (a press would be refused anyway)
            text, buttons = texts.not_yours(approval), []
        try:
            bot.edit(row.chat_id, row.message_id, text, buttons)
        except bot.BadRequest as exc:  # the message is gone from the chat: nothing to edit, ever (nor for the sweep)
            logger.warning("telegram: rewriting the request of approval %s to %s failed: %s", approval.pk, row.chat_id, exc)
        except bot.TelegramError as exc:
            raise Failed(f"{type(exc).__name__}: {exc}") from None
        self._retire_warnings(row)
        return _written(approval, shown)

    def _warn(self, warning: ExpiryWarning) -> dict:
        approval = warning.message.approval
        if approval.expires_at != warning.expires_at:
            raise Unwanted("Extended since it was queued: the new deadline gets a warning of its own.")
        version = warning.message.versions.order_by("-pk").first()  # names the approval; Extend decides nothing
        buttons = texts.warning_buttons(approval, version.token) if version else []
        return {"reply_id": self._reply(warning, texts.warning(approval), buttons)}

    def _reply(self, row, text: str, buttons=None) -> int:
        with refusals():
            return bot.send(row.message.chat_id, text, buttons, reply_to=row.message.message_id)

    def _retire_warnings(self, row: ApprovalMessage) -> None:
        """Telegram's own step after an outcome or a rewrite: the sent warnings whose Extend button is
        spent (extended, or decided) say so, without it. Best effort: a press on one left behind is
        answered, and changes nothing."""
        approval = row.approval
        spent = ExpiryWarning.objects.filter(message=row, status=Status.SENT, reply_id__isnull=False)
        if approval.status == Pending:
            spent = spent.exclude(expires_at=approval.expires_at)  # still the deadline it warns of: its button works
        for warning in spent:
            try:
                bot.edit(row.chat_id, warning.reply_id, texts.warning_spent(approval))
            except bot.TelegramError as exc:
                logger.warning("telegram: retiring the warning of approval %s failed: %s", approval.pk, exc)
                continue
            ExpiryWarning.objects.filter(pk=warning.pk, status=Status.SENT).update(status=Status.CLOSED, updated_at=timezone.now())


def _written(approval: Approval, shown: texts.Shown) -> dict:
    """What a message's text showed, stored with it: the votes it counts, the version, whether whole."""
    return {"votes_seen": len(approval.votes.all()), "shown_hash": approval.shown_hash, "complete": shown.complete}


CHANNEL = TelegramChannel()
