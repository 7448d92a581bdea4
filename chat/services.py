"""Writes the pages and the API make: start a conversation, post a message, retry, resume."""
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.models import Approval
from approvals.permissions import is_approver
from approvals.pauses import questions
from approvals.deciders.routing import ASKING_TOKEN, asks_only
from approvals.services import AlreadyDecided, InvalidAnswer, NotAllowed, answer, cancel_pending, decide_all
from approvals.text import Intent, TextDecision, parse_decision
from core import live
from hitl.celery import enqueue_on_commit
from core.inputs import is_storable

from . import fragments, loop, messages, quotas
from .models import Agent, Conversation, Message
from .selectors import may_use
from .tasks import advance_conversation


class InvalidMessage(ValueError):
    pass


class NotOwner(PermissionError):
    pass


class UnknownAgent(LookupError):
    """An agent the user may not use (or that does not exist): the same answer for both."""


def start_conversation(*, user, agent: Agent, content: str, relay_to: str = "") -> Conversation:
    """`relay_to`: the chat it was started from (chat.elsewhere), where its answers go too."""
    content = _clean(content)
    _check_agent(user, agent)
    # What post_message does, less what a conversation made in this same transaction cannot need:
    # no lock, no pending approvals to read, and no pushes (no tab can be open on it yet).
    with transaction.atomic():
        quotas.check_conversation(user)  # and the message's: in the transaction that stores what they count
        conversation = Conversation.objects.create(
            owner=user, agent=agent, title=content[:80], status=Conversation.Status.RUNNING, relay_to=relay_to
        )
        message = Message.objects.create(
            conversation=conversation, position=1, role=Message.Role.USER, content=content, author=user
        )
        enqueue_on_commit(advance_conversation, str(conversation.pk))
    _set_loaded_messages(conversation, [message])
    return conversation


def post_message(*, conversation: Conversation, user, content: str, shown: dict[int, str] | None = None, relay_to: str = "") -> Message:
    """Store what the owner typed and set the loop going, or, while calls wait for approval, read
    it as a decision (a clear yes or no), ask for a clearer one, or hold it until they are decided.

    `shown` is what the writer had in front of them: the pending approvals the page rendered (id →
    version), or the ids a program says its reply answers (version ""). A reply decides only those:
    if anything else is pending, or changed since, it decides nothing and says why. None (a program
    that names none) decides whatever is pending, by the same rules. `relay_to`: the chat it was
    written from (chat.elsewhere), where the answer goes too; "" (the site, the API): nowhere else."""
    content = _clean(content)
    if conversation.owner_id != user.pk:
        raise NotOwner("Only the conversation's owner can write in it.")
    _refuse_outside(conversation)
    _check_agent(user, conversation.agent)
    with transaction.atomic():
        messages.lock_conversation(conversation)
        quotas.check_message(user)
        # Pending approvals, not the status, say whether a reply decides: the status turns to
        # waiting a moment after the calls are stored, and a fast client can answer in between.
        if Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).exists():
            return _post_while_waiting(conversation, user, content, shown)
        message = _append(conversation, role=Message.Role.USER, content=content, author=user, push=False)
        _set_running(conversation, message, relay_to=relay_to)
    return message


def _post_while_waiting(conversation: Conversation, user, content: str, shown: dict[int, str] | None) -> Message:
    pending = list(
        Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).select_related("tool_call__message")
    )
    decision = parse_decision(content)
    if unseen := _unseen(pending, shown):
        # Written before the page showed a call (or its edit): the reply cannot be about it.
        message = _append(
            conversation, role=Message.Role.USER, content=content, author=user, in_model_context=decision.intent == Intent.NONE
        )
        _notice(
            conversation,
            f"{_calls(len(unseen)).capitalize()} waiting that your page had not shown when you wrote ({_names(unseen)}): "
            "nothing was decided. Look at the cards, then decide.",
        )
        return message
    if any(approval.kind != Approval.Kind.ACTION for approval in pending):
        return _post_to_a_pause(conversation, user, content, pending)
    if decision.intent == Intent.NONE:
        message = _append(conversation, role=Message.Role.USER, content=content, author=user)
        _notice(conversation, "Your message will be answered once the pending calls are decided.")
        return message
    # A reply that reads as a decision is the user's, not the model's, whether or not it decides.
    message = _append(
        conversation, role=Message.Role.USER, content=content, author=user, in_model_context=False
    )
    refusal = ASKING_TOKEN if asks_only(user) else _why_not_decisive(decision, pending, conversation)
    if refusal:
        _notice(conversation, refusal + " Nothing was decided. " + _HOW_TO_DECIDE)
        return message
    outcome = decide_all(
        conversation_id=conversation.pk,
        user=user,
        via=Approval.Via.TEXT,
        approve=decision.intent == Intent.APPROVE,
        reason=decision.reason,
        shown={approval.pk: (shown or {}).get(approval.pk, "") for approval in pending},
    )
    if outcome.needs_confirmation:
        _notice(
            conversation,
            f"Not approved: {_calls(len(outcome.needs_confirmation))} to be approved on its card: "
            "a critical call with its typed confirmation, one that needs step-up with your passkey.",
        )
    if waiting := len(outcome.not_allowed):
        _notice(conversation, f"Not approved: {_calls(waiting)} for an approver other than you to decide.")
    if changed := len(outcome.changed):
        _notice(conversation, f"Not approved: {_calls(changed)} edited since it was requested. Approve each on its card.")
    return message


def _append(conversation: Conversation, **fields) -> Message:
    """Store a message in post_message's transaction, which holds the conversation's lock already."""
    return messages.append_message(conversation, locked=True, **fields)


def _notice(conversation: Conversation, text: str) -> Message:
    """A notice in post_message's transaction, which holds the conversation's lock already."""
    return messages.add_notice(conversation, text, locked=True)


def _unseen(pending: list[Approval], shown: dict[int, str] | None) -> list[Approval]:
    """The pending approvals the writer had not been shown as they stand now ([] when `shown` is None)."""
    if shown is None:
        return []
    return [a for a in pending if a.pk not in shown or shown[a.pk] not in ("", a.shown_hash)]


def _names(approvals: list[Approval]) -> str:
    return ", ".join(approval.tool_call.name for approval in approvals[:5]) + (", …" if len(approvals) > 5 else "")


def _post_to_a_pause(conversation: Conversation, user, content: str, pending: list[Approval]) -> Message:
    """While the agent waits for an answer: a typed reply is the answer when one question is all that
    is pending (checked by its type: if it does not fit, nothing is decided and the notice says why).
    Beside other pending calls, or for a plan, typed text decides nothing: the cards do."""
    approval = pending[0] if len(pending) == 1 else None
    if approval is None or approval.kind != Approval.Kind.QUESTION:
        message = _append(conversation, role=Message.Role.USER, content=content, author=user)
        what = "A plan is approved on its card, step by step" if approval else "While other calls are pending too, each is decided on its card"
        _notice(conversation, f"{what}: nothing was decided. Your message will be answered once they are.")
        return message
    # The answer reaches the model as the question's result, not as a message of its own.
    message = _append(
        conversation, role=Message.Role.USER, content=content, author=user, in_model_context=False
    )
    try:
        answer(
            approval.pk, user=user, via=Approval.Via.TEXT, shown_hash=approval.shown_hash,
            value=questions.from_text(approval.question, content),
        )
    except InvalidAnswer as exc:
        _notice(conversation, f"That does not answer the question: {exc} Nothing was decided; reply again, or answer on its card.")
    except (AlreadyDecided, NotAllowed) as exc:
        _notice(conversation, f"Not answered: {exc}")
    return message


_HOW_TO_DECIDE = "Decide each call on its card, or reply “yes” or “no, because …” when one call is pending, “approve all N” or “reject all N because …” when N are."


def _why_not_decisive(decision: TextDecision, pending: list[Approval], conversation: Conversation) -> str:
    """Why a typed yes or no may not decide these calls, or "" when it may. It decides only what
    it cannot misread: one call, or exactly the number of calls it states, and never calls the
    agent asked about in words (a question beside a gated call is how a hidden call rides on a
    harmless "yes please")."""
    if decision.intent == Intent.AMBIGUOUS:
        return f"That is not a clear yes or no ({_calls(len(pending))} pending)."
    if _agent_wrote(conversation, pending):
        # Any words of the agent's in the turn that asked for the calls, beside them or a step
        # before, may ask something a "yes" answers, in any punctuation ("Reply yes to archive
        # them.", a full-width "？"): the cards decide them.
        return "The agent wrote to you in the same turn as these calls (it may have asked a question), so a typed reply does not decide them."
    count = decision.count if decision.count is not None else 1
    if count != len(pending):
        said = f"Your reply speaks of {_count(count)}" if decision.count is not None else "Your reply does not say how many calls it decides"
        return f"{said}, and {_calls(len(pending))} pending."
    return ""


def _agent_wrote(conversation: Conversation, pending: list[Approval]) -> bool:
    """Whether the agent wrote words in the turn that asked for these calls: since the last message
    the user wrote to the model before them."""
    first = min(approval.tool_call.message.position for approval in pending)
    user_messages = conversation.messages.filter(role=Message.Role.USER, in_model_context=True, position__lt=first)
    since = user_messages.order_by("-position").values_list("position", flat=True).first() or 0
    return conversation.messages.filter(role=Message.Role.ASSISTANT, position__gt=since, content__regex=r"\S").exists()


def _count(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


def _calls(count: int) -> str:
    return f"{_count(count)} {'is' if count == 1 else 'are'}"


def stop_conversation(*, conversation: Conversation, user, via: str) -> list[int]:
    """Stop: cancel every pending approval and every call that has not started, let a running tool
    finish (a tool that waits on something elsewhere, a remote agent's task, is told to end it:
    ToolSpec.cancel), discard a model answer in flight, and leave the conversation idle.

    Returns the ids of the approvals whose calls it cancelled: those it found pending (now
    `cancelled`), and those approved whose call had not started yet (the decision stays on record
    as it was made; the call reads `cancelled`). A decision racing the Stop either wins or finds
    its approval cancelled."""
    if conversation.owner_id != user.pk and not is_approver(user):
        raise NotOwner("Only the conversation's owner or an approver can stop it.")
    with transaction.atomic():
        messages.lock_conversation(conversation)  # first, as every writer of the conversation does
        cancelled = {approval.pk for approval in cancel_pending(conversation_id=conversation.pk, user=user, via=via)}
        for call in loop.stop(conversation, user=user):
            if call.is_gated:
                cancelled.add(call.approval.pk)
    return sorted(cancelled)


def retry(*, conversation: Conversation, user) -> None:
    if conversation.owner_id != user.pk:
        raise NotOwner("Only the conversation's owner can retry it.")
    _refuse_outside(conversation)
    _check_agent(user, conversation.agent)
    with transaction.atomic():
        messages.lock_conversation(conversation)  # before the user's, as post_message takes them
        quotas.check_message(user)
        updated = Conversation.objects.filter(pk=conversation.pk, status=Conversation.Status.FAILED).update(
            status=Conversation.Status.RUNNING, error="", updated_at=timezone.now()
        )
        if updated:
            conversation.status, conversation.error = Conversation.Status.RUNNING, ""
            messages.push_status(conversation)
            enqueue_on_commit(advance_conversation, str(conversation.pk))


def _refuse_outside(conversation: Conversation) -> None:
    """An outside agent's or an MCP client's conversation holds its calls only: no model runs in it."""
    if conversation.is_outside:
        raise InvalidMessage(
            "This conversation holds calls from an outside agent: decide them on their cards. Nobody chats in it, and no model runs."
        )


def _check_agent(user, agent: Agent) -> None:
    """Agents are a security boundary: every start and every continuation checks who may use it
    now (access taken away stops a conversation going on, not only new ones)."""
    if not may_use(user, agent):
        raise UnknownAgent("Unknown agent.")


def _set_loaded_messages(conversation: Conversation, stored: list[Message]) -> None:
    """Make `conversation.messages.all()` these messages, without calls, as if prefetched: whoever
    shows a conversation just started (the API's answer) reads them with no query."""
    for message in stored:
        messages.set_loaded_calls(message, [])
    loaded = conversation.messages.all()
    loaded._result_cache, loaded._prefetch_done = stored, True
    conversation._prefetched_objects_cache = {"messages": loaded}


def _set_running(conversation: Conversation, message: Message, *, relay_to: str = "") -> None:
    Conversation.objects.filter(pk=conversation.pk).update(
        status=Conversation.Status.RUNNING, error="", updated_at=timezone.now(), relay_to=relay_to
    )
    conversation.status, conversation.error, conversation.relay_to = Conversation.Status.RUNNING, "", relay_to
    # The message and the status bar it sets reach a tab as one frame, on commit.
    live.push(
        live.conversation_group(conversation.pk),
        lambda: fragments.message_html(message, oob=True) + fragments.conversation_status_html(conversation),
    )
    enqueue_on_commit(advance_conversation, str(conversation.pk))


def _clean(content: str) -> str:
    content = (content or "").strip()
    if not content:
        raise InvalidMessage("The message is empty.")
    if "\x00" in content:  # PostgreSQL cannot store it; no one types it
        raise InvalidMessage("The message contains a NUL character.")
    if not is_storable(content):
        raise InvalidMessage("The message contains a lone UTF-16 surrogate, which is not text.")
    if len(content) > settings.HITL_MAX_MESSAGE_CHARS:
        raise InvalidMessage(f"The message is longer than {settings.HITL_MAX_MESSAGE_CHARS} characters.")
    return content
