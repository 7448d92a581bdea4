"""What the bot does with an update (from the webhook or the poller): link and unlink accounts,
decide on a press (or extend from a warning), take a typed reason, confirmation or answer. Every
decision goes through approvals.services as the user whose Telegram id sent the update, stating
the version the pressed message showed and whether it showed it whole; the callback query is
always answered. An update it cannot read is logged and dropped, never an error."""
import logging
from html import escape

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals import services
from chat import elsewhere
from approvals.pauses import questions
from approvals.models import Approval
from approvals.text import Intent, parse_decision
from deliveries import tasks as delivery_tasks
from deliveries.models import LinkRefused

from . import accounts, bot, texts
from .channel import CHANNEL
from .models import ApprovalMessage, SentVersion, TelegramAccount

logger = logging.getLogger(__name__)
Awaiting = TelegramAccount.Awaiting
CHAT = "telegram"  # Conversation.relay_to of the conversations this bot talks to
NOT_LINKED = "This Telegram account is not linked: get a code on the site's Telegram page, then send /start <code>."
SHOWN_CUT = "This message showed the call cut: open it on the site to approve."


def handle(update: dict) -> None:
    try:
        if isinstance(update.get("callback_query"), dict):
            on_press(update["callback_query"])
        elif isinstance(update.get("message"), dict):
            on_message(update["message"])
    except Exception:  # one bad update must never stop the others (nor the poller)
        logger.exception("telegram: update %s could not be handled", update.get("update_id"))
        query = update.get("callback_query")
        if isinstance(query, dict) and isinstance(query.get("id"), str):  # the button must not spin for ever
            bot.answer_press(query["id"], "That press could not be handled: look at the request on the site.")


def on_message(message: dict) -> None:
    sender, chat = message.get("from") or {}, message.get("chat") or {}
    text = message.get("text")
    if not isinstance(sender.get("id"), int) or not isinstance(chat.get("id"), int) or not isinstance(text, str):
        return
    if chat.get("type") != "private":
        return bot.reply(chat["id"], "I only work in a private chat.")
    command, _, rest = text.strip().partition(" ")
    command = command.split("@")[0]
    if command == "/start":
        return _link(rest.strip(), sender, chat["id"])
    if command == "/stop":
        account = accounts.unlink_telegram(sender["id"])
        return bot.reply(chat["id"], f"Unlinked from {escape(account.user.get_username())}." if account else NOT_LINKED)
    account = _account(sender["id"])
    if account is None:
        return bot.reply(chat["id"], NOT_LINKED)
    if command == "/new":
        TelegramAccount.objects.filter(pk=account.pk).update(conversation=None)
        return bot.reply(chat["id"], "Your next message starts a new conversation.")
    if not account.awaiting or account.awaiting_approval_id is None:
        return _chat(account, text.strip())
    _typed(account, text.strip())


def _chat(account: TelegramAccount, text: str) -> None:
    """A message to the bot: the next line of its conversation with the agent (chat.elsewhere), whose
    answer comes back here once the run ends (relay_answer)."""
    if text.startswith("/"):
        return bot.reply(account.chat_id, "Commands: /new starts a new conversation, /stop unlinks this account. "
                                          "Anything else you write goes to your agent.")
    if parse_decision(text).intent != Intent.NONE:  # "yes", "approve it": meant for a request, not the agent
        return bot.reply(account.chat_id, "Decide with the buttons on a request: a typed yes or no decides nothing here. "
                                          "Anything else you write goes to your agent.")
    try:
        with transaction.atomic():  # the chat names its conversation before the run can start (on commit)
            conversation = elsewhere.say(account.user, account.conversation, text, relay_to=CHAT)
            TelegramAccount.objects.filter(pk=account.pk).update(conversation=conversation)
    except elsewhere.Refused as exc:
        return bot.reply(account.chat_id, escape(str(exc)))
    if conversation.pk != account.conversation_id:
        bot.reply(account.chat_id, f"A new conversation with {escape(conversation.agent.name)}: "
                                   f"{_conversation_link(conversation)}. /new starts another.")


def on_press(query: dict) -> None:
    query_id, sender = query.get("id"), query.get("from") or {}
    if not isinstance(query_id, str):
        return
    account = _account(sender.get("id")) if isinstance(sender.get("id"), int) else None
    if account is None:
        return bot.answer_press(query_id, NOT_LINKED)
    action, _, token = str(query.get("data") or "").partition(":")
    version = SentVersion.objects.select_related("message__approval").filter(token=token).first() if token else None
    if version is None:
        return bot.answer_press(query_id, "This request is no longer known.")
    if version.message.account_id != account.pk:  # another person's copy: no button of theirs decides
        return bot.answer_press(query_id, "You may not decide this request.")
    # What this very message showed, and whether whole: a press decides that version or nothing,
    # and through a message that showed it cut it can reject, never approve.
    row, shown_hash, whole = version.message, version.shown_hash, version.complete
    approval = row.approval
    if action != texts.EXTEND:  # an Extend press is on the warning, not on the request
        _delivered(version, query.get("message"))
    user, via = account.user, Approval.Via.TELEGRAM
    try:
        if action == texts.APPROVE:
            if approval.kind == Approval.Kind.ACTION and approval.confirmation_required:
                services.check_decidable(approval.pk, user, approve=True, shown_hash=shown_hash, shown_whole=whole, via=via)
                _await(account, approval, Awaiting.CONFIRMATION, shown_hash, whole)
                bot.reply(account.chat_id, f"#{approval.pk} is critical: type <code>{escape(approval.confirmation_hint)}</code> "
                          f"to approve it, or open {escape(texts.conversation_url(approval))}")
                return bot.answer_press(query_id, "Type the confirmation to approve.")
            decided = services.decide(approval.pk, user=user, approve=True, via=via, shown_hash=shown_hash, shown_whole=whole)
            return bot.answer_press(query_id, _approved(decided))
        if action == texts.REJECT:
            if approval.kind == Approval.Kind.QUESTION:
                services.answer(approval.pk, user=user, via=via, shown_hash=shown_hash, shown_whole=whole, decline=True)
                said = "Declined."
            else:
                services.decide(approval.pk, user=user, approve=False, via=via, shown_hash=shown_hash, shown_whole=whole)
                said = "Rejected."
            if account.awaiting_approval_id == approval.pk:  # pressed under "Why reject?": no reason to wait for now
                _await(account, None, Awaiting.NOTHING, "", False)
            return bot.answer_press(query_id, said)
        if action == texts.REJECT_WITH_REASON:
            services.check_decidable(approval.pk, user, approve=False, shown_hash=shown_hash, shown_whole=whole, via=via)
            _await(account, approval, Awaiting.REASON, shown_hash, whole)
            bot.reply(account.chat_id, *texts.reason_prompt(approval, version.token))
            return bot.answer_press(query_id, "Reply with the reason.")
        if action == texts.TYPE:
            services.check_decidable(approval.pk, user, approve=True, shown_hash=shown_hash, shown_whole=whole, via=via)
            _await(account, approval, Awaiting.ANSWER, shown_hash, whole)
            bot.reply(account.chat_id, f"Reply with your answer to #{approval.pk}.")
            return bot.answer_press(query_id, "Reply with your answer.")
        if action.startswith(texts.CHOOSE) and action[1:].isdigit() and approval.kind == Approval.Kind.QUESTION:
            value = services.option_at(approval, int(action[1:]))
            services.answer(approval.pk, user=user, via=via, shown_hash=shown_hash, shown_whole=whole, value=value)
            return bot.answer_press(query_id, "Answered.")
        if action == texts.EXTEND:
            extended = services.extend(approval.pk, user=user, via=via)
            return bot.answer_press(query_id, f"Extended: #{approval.pk} now expires at {extended.expires_at:%H:%M} UTC.")
        return bot.answer_press(query_id, "That button is not one of this request's.")
    except services.ShownCut:
        return bot.answer_press(query_id, SHOWN_CUT)
    except services.AlreadyDecided as exc:
        _close_now(row)
        return bot.answer_press(query_id, f"Too late: {texts.outcome_line(exc.approval)}.")
    except services.ArgumentsChanged:
        return bot.answer_press(query_id, _changed(approval))
    except services.NotAllowed as exc:
        return bot.answer_press(query_id, str(exc))
    except Approval.DoesNotExist:
        return bot.answer_press(query_id, "You may not decide this request.")
    except services.DecisionError as exc:
        return bot.answer_press(query_id, str(exc))


def _typed(account: TelegramAccount, text: str) -> None:
    approval = Approval.objects.get(pk=account.awaiting_approval_id)
    # The version of the message whose button asked for this reply, never whichever is newest.
    # And whether that message showed it whole: a reply under a cut one approves nothing.
    user, via, shown_hash, whole = account.user, Approval.Via.TELEGRAM, account.awaiting_shown_hash, account.awaiting_complete
    awaiting = account.awaiting
    try:
        if awaiting == Awaiting.REASON:
            services.decide(approval.pk, user=user, approve=False, via=via, shown_hash=shown_hash, shown_whole=whole, reason=text[:2000])
            said = f"Rejected #{approval.pk}."
        elif awaiting == Awaiting.CONFIRMATION:
            decided = services.decide(
                approval.pk, user=user, approve=True, via=via, shown_hash=shown_hash, shown_whole=whole, confirmation=text
            )
            said = f"Approved #{approval.pk}." if decided.status != Approval.Status.PENDING else f"#{approval.pk}: {_approved(decided)}"
        else:
            value = questions.from_text(approval.question, text)
            services.answer(approval.pk, user=user, via=via, shown_hash=shown_hash, shown_whole=whole, value=value)
            said = f"Answered #{approval.pk}."
    except services.ShownCut:
        said = SHOWN_CUT
    except services.ConfirmationRequired:
        return bot.reply(account.chat_id, f"That is not it: type <code>{escape(approval.confirmation_hint)}</code> exactly to approve #{approval.pk}.")
    except services.InvalidAnswer as exc:
        return bot.reply(account.chat_id, f"{escape(str(exc))} Reply again.")
    except services.AlreadyDecided as exc:
        said = f"Too late: {texts.outcome_line(exc.approval)}."
    except services.ArgumentsChanged:
        said = _changed(approval)
    except (services.DecisionError, Approval.DoesNotExist) as exc:
        said = str(exc) or "You may not decide this request."
    _await(account, None, Awaiting.NOTHING, "", False)
    bot.reply(account.chat_id, escape(said))


def _link(code: str, sender: dict, chat_id: int) -> None:
    if not code:
        return bot.reply(chat_id, "Send /start followed by the code from the site's Telegram page.")
    try:
        account = accounts.link(code, telegram_user_id=sender["id"], chat_id=chat_id, telegram_username=str(sender.get("username") or ""))
    except LinkRefused as exc:
        return bot.reply(chat_id, escape(str(exc)))
    bot.reply(chat_id, f"Linked to {escape(account.user.get_username())}. Requests that you may decide will come here.")


def _account(telegram_user_id) -> TelegramAccount | None:
    return TelegramAccount.objects.select_related("user").filter(telegram_user_id=telegram_user_id, user__is_active=True).first()


def _await(account: TelegramAccount, approval: Approval | None, what: str, shown_hash: str, complete: bool) -> None:
    """Remember what the next typed message answers, and what the message that asked for it showed."""
    with transaction.atomic():
        TelegramAccount.objects.filter(pk=account.pk).update(
            awaiting=what, awaiting_approval=approval, awaiting_shown_hash=shown_hash, awaiting_complete=complete
        )
    account.awaiting, account.awaiting_approval, account.awaiting_shown_hash = what, approval, shown_hash
    account.awaiting_complete = complete


def _approved(approval: Approval) -> str:
    """What an approve did: decided it, or (a quorum not reached yet) counted as one vote of several."""
    if approval.status == Approval.Status.PENDING:
        return texts.counted_line(approval)
    return "Approved."


def _changed(approval: Approval) -> str:
    return f"The call was edited after this message: decide it on the site, {texts.conversation_url(approval)}"


def _delivered(version: SentVersion, message) -> None:
    """A press proves its message was delivered. If the send was never recorded (the worker died, or
    Telegram's answer was lost, after Telegram had delivered it), record it now, with what it showed:
    closing the request then edits this message to the outcome instead of leaving its buttons on the phone."""
    row = version.message
    if row.message_id is not None or not isinstance(message, dict):
        return
    chat, message_id = message.get("chat") or {}, message.get("message_id")
    if not isinstance(message_id, int) or not isinstance(chat, dict) or chat.get("id") != row.chat_id:
        return
    if ApprovalMessage.objects.filter(pk=row.pk, message_id__isnull=True).update(
        status=ApprovalMessage.Status.SENT, message_id=message_id, shown_hash=version.shown_hash, complete=version.complete,
        last_error="", updated_at=timezone.now(),
    ):
        row.status, row.message_id = ApprovalMessage.Status.SENT, message_id


def _close_now(row: ApprovalMessage) -> None:
    """The late press's message shows the outcome too (its own task may still be on its way)."""
    try:
        delivery_tasks.close.delay(CHANNEL.name, [row.pk])
    except Exception as exc:  # Redis down: the sweep closes it
        logger.warning("telegram: could not enqueue closing message %s: %s", row.pk, exc)


def _conversation_link(conversation) -> str:
    return f'<a href="{escape(f"{settings.HITL_BASE_URL}/conversations/{conversation.pk}/")}">open it in hitl</a>'
