"""What a press or a modal's submission does: authorised by the linked account of the Slack user
who sent it (as Slack signed it), deciding through approvals.services via "slack" exactly the
version the pressed message showed (its button's token), approving only if that message showed it
whole (SentVersion.complete: whatever a forged payload says), extending its deadline from a
warning, and answered in Slack: an ephemeral message to the presser, a modal opened, or errors
shown in the modal."""
import logging

from django.utils import timezone

from approvals import services
from approvals.pauses import questions
from approvals.models import Approval
from deliveries.tasks import close_later
from core.visible import reveal

from . import accounts, blocks, client
from .channel import CHANNEL
from .models import SentVersion, SlackAccount, SlackMessage

logger = logging.getLogger(__name__)
VIA = Approval.Via.SLACK
NOT_LINKED = "Your Slack account is not linked: get a code on your profile page, then send /hitl link <code>."
UNKNOWN = "This request is no longer known."
SHOWN_CUT = "This message showed the call cut: open it on the site to approve:"
REFUSALS = (services.DecisionError, Approval.DoesNotExist)  # why a press decided nothing, told to the presser


class Press:
    """Who pressed what, where: read defensively from a payload that passed the signature check."""

    def __init__(self, payload: dict):
        user, team = _dict(payload.get("user")), _dict(payload.get("team"))
        self.slack_user_id = _str(user.get("id"))
        self.account = accounts.account_of(_str(team.get("id")) or _str(user.get("team_id")), self.slack_user_id)
        container = _dict(payload.get("container"))
        self.channel = _str(_dict(payload.get("channel")).get("id")) or _str(container.get("channel_id"))
        self.message_ts = _str(container.get("message_ts"))
        self.trigger_id = _str(payload.get("trigger_id"))

    def tell(self, text: str) -> None:
        client.tell(self.channel, self.slack_user_id, text)


def handle(payload: dict) -> dict | None:
    """The JSON to answer Slack with (a modal's errors), or None for an empty 200."""
    kind = payload.get("type")
    if kind == "block_actions":
        on_actions(payload)
    elif kind == "view_submission":
        return on_submission(payload)
    return None


def on_actions(payload: dict) -> None:
    press = Press(payload)
    actions = payload.get("actions")
    action = _dict(actions[0]) if isinstance(actions, list) and actions else {}
    action_id = _str(action.get("action_id"))
    if action_id == blocks.OPEN or not action_id:
        return  # the link button: Slack opened the site
    if press.account is None:
        return press.tell(NOT_LINKED)
    value = _str(action.get("value")) or _str(_dict(action.get("selected_option")).get("value"))
    index, token = None, value
    if action_id in (blocks.CHOOSE, blocks.SELECT):
        number, _, token = value.partition(".")
        index = int(number) if number.isdigit() and len(number) < 4 else None
    version = _version(token, press.account)
    if version is None:
        return press.tell(UNKNOWN)
    row = version.message
    if action_id == blocks.EXTEND:
        return _extend(press, row)  # pressed on the warning, a reply: its ts is not the request's
    _delivered(row, version, press)
    approval, user = row.approval, press.account.user
    # Whatever the buttons were, a press through a rendering that showed the call cut never approves.
    shown = {"shown_hash": version.shown_hash, "shown_whole": version.complete}
    try:
        if action_id == blocks.APPROVE and approval.kind != Approval.Kind.QUESTION:
            if approval.confirmation_required:
                services.check_decidable(approval.pk, user, approve=True, via=VIA, **shown)
                return _open(press, blocks.confirm_view(approval, token), approval)
            decided = services.decide(approval.pk, user=user, approve=True, via=VIA, **shown)
            if decided.status == Approval.Status.PENDING:
                press.tell(blocks.counted_line(decided))
        elif action_id in (blocks.REJECT, blocks.REJECT_WITH_REASON):
            # Reject always asks why first (the reason may be left empty); so does declining a question.
            services.check_decidable(approval.pk, user, approve=False, via=VIA, **shown)
            return _open(press, blocks.reason_view(approval, token), approval)
        elif action_id == blocks.ANSWER and approval.kind == Approval.Kind.QUESTION:
            services.check_decidable(approval.pk, user, approve=True, via=VIA, **shown)
            return _open(press, blocks.answer_view(approval, token), approval)
        elif index is not None and approval.kind == Approval.Kind.QUESTION:
            services.answer(approval.pk, user=user, via=VIA, value=services.option_at(approval, index), **shown)
        else:
            press.tell("That button is not one of this request's.")
    except REFUSALS as exc:
        _refused(press, row, approval, exc)


def _extend(press: Press, row: SlackMessage) -> None:
    """The warning's Extend: the deadline pushed back once, as the linked user who pressed."""
    try:
        extended = services.extend(row.approval_id, user=press.account.user, via=VIA)
    except REFUSALS as exc:
        return _refused(press, row, row.approval, exc)
    press.tell(blocks.extended_line(extended))


def _refused(press: Press, row: SlackMessage, approval: Approval, exc: Exception) -> None:
    """Tell the presser, in an ephemeral, why their press decided nothing."""
    if isinstance(exc, services.AlreadyDecided):
        _close_now(row)
        press.tell(blocks.too_late(exc.approval))
    elif isinstance(exc, services.ShownCut):
        press.tell(f"{SHOWN_CUT} {blocks.conversation_url(approval)}")
    elif isinstance(exc, services.ArgumentsChanged):
        press.tell(_changed(approval))
    elif isinstance(exc, Approval.DoesNotExist):
        press.tell("You may not decide this request.")
    else:
        press.tell(str(exc))


def on_submission(payload: dict) -> dict | None:
    press, view = Press(payload), _dict(payload.get("view"))
    callback_id, token = _str(view.get("callback_id")), _str(view.get("private_metadata"))
    field = {blocks.REASON_VIEW: "reason", blocks.CONFIRM_VIEW: "confirmation", blocks.ANSWER_VIEW: "answer"}.get(callback_id)
    if field is None:
        return None
    if press.account is None:
        return _errors(field, NOT_LINKED)
    version = _version(token, press.account)
    if version is None:
        return _errors(field, UNKNOWN)
    typed = _typed(view, field)
    approval, user = version.message.approval, press.account.user
    shown = {"shown_hash": version.shown_hash, "shown_whole": version.complete}
    try:
        if field == "reason" and approval.kind == Approval.Kind.QUESTION:
            services.answer(approval.pk, user=user, via=VIA, decline=True, reason=typed.strip(), **shown)
        elif field == "reason":
            services.decide(approval.pk, user=user, approve=False, via=VIA, reason=typed.strip(), **shown)
        elif field == "confirmation":
            services.decide(approval.pk, user=user, approve=True, via=VIA, confirmation=typed, **shown)
        else:
            value = questions.from_text(approval.question, typed)
            services.answer(approval.pk, user=user, via=VIA, value=value, **shown)
    except services.ConfirmationRequired:
        return _errors(field, f"That is not it: type {reveal(approval.confirmation_hint)} exactly to approve.")
    except services.AlreadyDecided as exc:
        _close_now(version.message)
        return _errors(field, blocks.too_late(exc.approval))
    except services.ShownCut:
        return _errors(field, SHOWN_CUT.rstrip(":") + ".")
    except services.ArgumentsChanged:
        return _errors(field, _changed(approval))
    except Approval.DoesNotExist:
        return _errors(field, "You may not decide this request.")
    except services.DecisionError as exc:  # an invalid answer, not allowed, already voted...
        return _errors(field, str(exc))
    return None


def _version(token: str, account: SlackAccount) -> SentVersion | None:
    """The rendering whose button was pressed, if it was sent to this very account."""
    if not token or len(token) > 32:
        return None
    return SentVersion.objects.select_related(
        "message__approval__tool_call", "message__approval__conversation__agent", "message__approval__requested_by",
    ).filter(token=token, message__account=account).first()


def _open(press: Press, view: dict, approval: Approval) -> None:
    try:
        client.open_view(press.trigger_id, view)
    except client.ERRORS as exc:
        logger.warning("slack: opening a modal for approval %s failed: %s", approval.pk, client.error_code(exc))
        press.tell(f"The form could not open: decide on the site, {blocks.conversation_url(approval)}")


def _typed(view: dict, field: str) -> str:
    value = _dict(_dict(_dict(_dict(view.get("state")).get("values")).get(field)).get(field)).get("value")
    return _str(value)[:5000]


def _errors(field: str, text: str) -> dict:
    return {"response_action": "errors", "errors": {field: text[:150]}}


def _changed(approval: Approval) -> str:
    return f"The call was edited after this message: decide it on the site, {blocks.conversation_url(approval)}"


def _delivered(row: SlackMessage, version: SentVersion, press: Press) -> None:
    """A press proves its message was delivered: if the send was never recorded (Slack's answer was
    lost), record it now, as the pressed rendering showed it, so closing updates this message to
    the outcome instead of leaving its buttons."""
    if row.ts or not press.message_ts or not press.channel:
        return
    if SlackMessage.objects.filter(pk=row.pk, ts="").update(
        status=SlackMessage.Status.SENT, channel=press.channel, ts=press.message_ts, last_error="",
        shown_hash=version.shown_hash, complete=version.complete, updated_at=timezone.now(),
    ):
        row.status, row.channel, row.ts = SlackMessage.Status.SENT, press.channel, press.message_ts


def _close_now(row: SlackMessage) -> None:
    """The late press's message shows the outcome too (its own task may still be on its way; with
    Redis down, the enqueue is logged and the sweep closes it)."""
    close_later(CHANNEL, [row.pk])


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _str(value) -> str:
    return value if isinstance(value, str) else ""
