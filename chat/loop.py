"""advance(conversation_id): the agent loop's one idempotent step, and its helpers.

Each step reads the stored state and does the next thing: run approved calls, stop for pending
ones, or call the model. Nothing waits in memory, so any worker can pick a conversation up at any
step, after a crash or a restart, and the outcome is the same.
"""
import logging
import uuid

from django.db import transaction
from django.utils import timezone

from approvals import pauses
from approvals.models import Approval
from approvals.services import request_approval
from core import live, telemetry
from core.db import release_connection

from . import approved, fragments, freshness, lease, undo
from .asked import answer as round_answer, check_round, is_decision_round, latest_round, passed_on, store_round
from .gating import tool_context
from .history import History
from .messages import add_notice, load_calls, lock_conversation, push_status
from .llm import LLMError, Stopped, complete
from .models import Conversation, Message, ToolCall
from .signals import run_settled
from .streaming import AnswerStream
from .tools import InputRequired, ToolError, registry
from .turns import check_calls, store_turn

logger = logging.getLogger(__name__)


Status = ToolCall.Status


def advance(conversation_id, *, token: str = "") -> None:
    """Move a conversation forward until it waits for a human, finishes, or fails.

    `token` names the caller (the Celery task id). A redelivered task has the same id, so it may
    take over the lease its dead predecessor held; any other caller waits for the lease to expire.
    """
    token = token or uuid.uuid4().hex
    if not lease.claim(conversation_id, token):
        logger.info("conversation %s is not running or another task is advancing it", conversation_id)
        return
    try:
        with telemetry.agent_invocation(conversation_id):
            while _step(conversation_id, token):
                lease.renew(conversation_id, token)
    except Exception as exc:
        logger.exception("advancing conversation %s failed", conversation_id)
        conversation = Conversation.objects.get(pk=conversation_id)
        _fail(conversation, token, f"Something went wrong while the agent was working ({exc.__class__.__name__}).")
        raise


def _step(conversation_id, token: str) -> bool:
    """Do the next thing; True when there is more to do right away. The conversation's state is
    read once: its row, then its messages and the open turn's calls (History)."""
    conversation = Conversation.objects.select_related("agent").get(pk=conversation_id)
    telemetry.name_agent(conversation.agent.name, conversation.agent.slug, conversation.agent.model)
    if conversation.advancing_token != token:
        return False  # the lease was taken over after it expired: the new holder goes on
    history = History(conversation)
    turn = history.turn
    calls = list(turn.tool_calls.all()) if turn is not None else []
    unsettled = [call for call in calls if call.status not in ToolCall.FINISHED]
    with live.held_together():  # a card finished and the next one claimed go out as one frame
        for call in unsettled:
            _settle(call, conversation)
    if any(call.status in (Status.PENDING_APPROVAL, Status.WAITING_FOR_INPUT) for call in calls):
        return _wait_for_approval(conversation, turn, token)
    if unsettled:
        history.read_newer()  # what the user wrote while the calls were settled (a tool may take seconds)
    unanswered_user_message, steps = history.since_last_user_message(conversation.agent.max_steps + 1)
    if not (calls or unanswered_user_message):
        return _finish(conversation, turn, token)
    if steps >= conversation.agent.max_steps:
        with transaction.atomic():
            add_notice(conversation, f"Stopped after {conversation.agent.max_steps} model steps without a final answer.")
            _set_status(conversation, Conversation.Status.IDLE, token)
        return False
    return _call_model(conversation, token, history)


# --- Tool calls --------------------------------------------------------------------------------


def _settle(call: ToolCall, conversation: Conversation) -> None:
    """Bring one call of the open turn as far as it can go without a human."""
    if call.status == Status.RUNNING:
        # Only a dead predecessor leaves a call running while we hold the lease. It may or may not
        # have taken effect, so it is reported, never silently run again.
        _transition(
            call,
            Status.RUNNING,
            Status.INTERRUPTED,
            result="Interrupted: the worker stopped while this call was running, so it may or may "
            "not have taken effect. It was not run again.",
        )
    settle_call(call, conversation)


def settle_call(call: ToolCall, conversation: Conversation) -> None:
    """Apply a call's decision, run it once approved, resume it once its question is answered: for
    the loop's turn (under the lease) and for an MCP client's call (chat.outside, any thread). Each
    step is claimed by a conditional update, so two callers never both run a call."""
    if call.asked_by_id is not None:
        # A call a tool asked a human to decide (chat.asked): decided here, run by that tool (its resume), never here.
        _apply_decision(call)
        return
    if call.status == Status.PENDING_APPROVAL and _approved_action(call):
        # The decision copied and the call claimed in one conditional update: pending → running.
        _run(call, conversation, claim_from=Status.PENDING_APPROVAL)
    elif call.status == Status.PENDING_APPROVAL:
        _apply_decision(call, push_approved=False)
    if call.status == Status.APPROVED:
        _run(call, conversation)
    if call.status == Status.WAITING_FOR_INPUT:
        _resume(call, conversation)


def settle_alone(tool_call_id: int) -> None:
    """A call outside any model turn (an undo, chat.undo): its decision applied and, approved, run
    once; found running (its worker died), it is interrupted, never run again, as a turn's is."""
    call = ToolCall.objects.select_related("message__conversation__agent", "approval").filter(pk=tool_call_id).first()
    if call is None or call.status in ToolCall.FINISHED:
        return
    conversation = call.message.conversation
    with live.held_together():
        _settle(call, conversation)
        push_card(call.pk)


def finish_outside_call(call: ToolCall, status: str, **fields) -> bool:
    """An approval request's call, run by its outside caller: approved → succeeded or failed, as
    the caller reports (chat.outside.report_outcome), and the card shows it. False if it was not
    waiting for its outcome."""
    return _transition(call, Status.APPROVED, status, **fields)


def apply_decision(tool_call_id: int, *, with_status: bool = False) -> ToolCall | None:
    """Copy a decided approval onto its tool call; safe to repeat (used by the receiver and the loop).
    `with_status`: the card's push carries the status bar too (it counts what is left to decide)."""
    call = _loaded_call(tool_call_id)
    if call is not None:
        _apply_decision(call, with_status=with_status)
    return call


def push_card(tool_call_id: int) -> None:
    """Show every tab the card as stored now (after an edit that left it pending)."""
    call = _loaded_call(tool_call_id)
    if call is not None:
        live.push_now(live.conversation_group(call.message.conversation_id), fragments.tool_card_html(call, oob=True))


def _loaded_call(tool_call_id: int) -> ToolCall | None:
    """The call with its turn loaded (load_calls), so its card renders with the turn's Approve all."""
    message = Message.objects.filter(tool_calls__pk=tool_call_id).first()
    if message is None:
        return None
    load_calls(message)
    return next(call for call in message.tool_calls.all() if call.pk == tool_call_id)


def _approved_action(call: ToolCall) -> bool:
    """A call whose approval says run it (as _apply_decision reads an approval)."""
    return call.approval.status == Approval.Status.APPROVED and call.approval.kind == Approval.Kind.ACTION


def _apply_decision(call: ToolCall, *, push_approved: bool = True, with_status: bool = False) -> None:
    approval = call.approval
    if call.status != Status.PENDING_APPROVAL or approval.status == Approval.Status.PENDING:
        return
    # One push for the card and, when asked, the bar: a page that loses one loses both, and catches up on both.
    also = fragments.conversation_status_html(call.message.conversation) if with_status else ""
    status, result = _decided_state(approval)
    fields = {} if result is None else {"result": result}
    _transition(call, Status.PENDING_APPROVAL, status, push=push_approved or status != Status.APPROVED, also=also, **fields)


def _decided_state(approval: Approval) -> tuple[str, str | None]:
    """The status a decided approval moves its call to, and the result the model reads (None: none yet)."""
    if approval.kind != Approval.Kind.ACTION and approval.status != Approval.Status.CANCELLED:
        # A question or a plan: nothing runs, what the human decided is the result.
        finished = Status.SUCCEEDED if pauses.succeeded(approval) else (
            Status.EXPIRED if approval.status == Approval.Status.EXPIRED else Status.REJECTED
        )
        return finished, pauses.result(approval)
    if approval.status == Approval.Status.APPROVED:
        return Status.APPROVED, None
    if approval.status == Approval.Status.REJECTED and approval.decided_via == Approval.Via.REPEAT:
        return Status.REJECTED, _repeat_result(approval)
    if approval.status == Approval.Status.REJECTED and approval.decided_via == Approval.Via.RULE:
        return Status.REJECTED, approval.rejection_reason  # "Denied by rule #N: …"
    who = approval.decided_by.get_username() if approval.decided_by else "the system"
    if approval.status == Approval.Status.REJECTED:
        if approval.responded:  # words instead of a decision: the model's instruction
            return Status.REJECTED, f"Rejected by {who}, who answered instead: {approval.responded}"
        return Status.REJECTED, f"Rejected by {who}: {approval.rejection_reason}" if approval.rejection_reason else f"Rejected by {who}."
    if approval.status == Approval.Status.EXPIRED:
        return Status.EXPIRED, "Not run: the approval timed out."
    return Status.CANCELLED, _cancelled_result(who)


def show_decided(tool_call_id: int) -> None:
    """Show every tab a decision the moment it is stored, from the process that stored it: the card
    as the worker will move it (approved, rejected…), written by nobody. The worker that applies the
    decision pushes the card again as stored, a moment later (or the page's re-read shows it)."""
    call = _loaded_call(tool_call_id)
    if call is None or call.status != Status.PENDING_APPROVAL or call.approval.status == Approval.Status.PENDING:
        return
    call.status, result = _decided_state(call.approval)
    if result is not None:
        call.result = result
    live.push_now(live.conversation_group(call.message.conversation_id), fragments.tool_card_html(call, oob=True, approve_all=True))


def _repeat_result(approval: Approval) -> str:
    """What the model reads of a call rejected again at once (the scripted model reads "Already rejected")."""
    original = approval.repeat_of
    who = original.decided_by.get_username() if original.decided_by else "the system"
    when = original.decided_at.strftime("%H:%M UTC")
    why = f": {original.rejection_reason}" if original.rejection_reason else ""
    return (
        f"Already rejected by {who} at {when}{why}. This same call was rejected again without asking; "
        "do not ask for it again."
    )


def _transition(call: ToolCall, old: str, new: str, *, push: bool = True, also: str = "", **fields) -> bool:
    """Conditional update: only one worker moves a call out of `old`; the loser sees 0 rows."""
    if new in ToolCall.FINISHED:
        fields.setdefault("finished_at", timezone.now())
    if new == Status.RUNNING:
        fields.setdefault("started_at", timezone.now())
    if not ToolCall.objects.filter(pk=call.pk, status=old).update(status=new, **fields):
        call.refresh_from_db()
        return False
    call.status = new
    for name, value in fields.items():
        setattr(call, name, value)
    if push:
        # "Approve all (N)" counts pending calls: only a call that leaves pending changes it.
        card = fragments.tool_card_html(call, oob=True, approve_all=old == Status.PENDING_APPROVAL)
        live.push_now(live.conversation_group(call.message.conversation_id), card + also)
    return True


def _run(call: ToolCall, conversation: Conversation, *, claim_from: str = Status.APPROVED) -> None:
    # An approval too old to act on (chat.freshness): the call lapses, unrun, and the model is told.
    if lapsed := freshness.lapsed_result(getattr(call, "approval", None) if call.is_gated else None, conversation.agent):
        _transition(call, claim_from, Status.LAPSED, result=lapsed)
        return
    # The claim: approved (or pending, its approval approved) → running. Whoever loses it must not run the tool.
    if not _transition(call, claim_from, Status.RUNNING):
        return
    live.flush()  # the card shows running before anything that may take a while (a preview, the tool)
    # Read again just before the run, so stored arguments edited after the approval never run.
    stored = ToolCall.objects.select_related("approval__edited_by").get(pk=call.pk)
    call.arguments, call.arguments_hash = stored.arguments, stored.arguments_hash
    approval = stored.approval if call.is_gated else None
    arguments = approval.edited_arguments if approval is not None and approval.is_edited else call.arguments
    if call.is_gated and not approved.matches_approval(call, approval, arguments):
        _transition(call, Status.RUNNING, Status.FAILED, error="Refused: the arguments differ from the ones that were approved.")
        return
    spec = _spec(call, conversation)
    if spec is None:  # a tool server's tool that is no longer offered to the agent
        _transition(call, Status.RUNNING, Status.FAILED, error=f"Not run: {call.name} is no longer available to this agent.")
        return
    context = tool_context(conversation, idempotency_key=str(approval.pk) if approval else f"call-{call.pk}", call=call)
    if approval is not None and (changed := approved.world_changed(spec, arguments, context, approval)):
        _transition(call, Status.RUNNING, Status.FAILED, error=changed)
        return
    note = approved.edit_note(call.arguments, arguments, approval) if approval is not None and approval.is_edited else ""
    _invoke(call, conversation, lambda: spec.run(arguments, context), note, kept=undo.keeping(spec, arguments, context))


def _invoke(call: ToolCall, conversation: Conversation, work, note: str = "", *, kept=None) -> None:
    """Run the claimed (running) call's tool and store how it ended: its output, its error, or the
    question it asks a human (then it waits for input). `kept`: a reversible tool's, what is stored
    with its success to undo it (chat.undo.keeping)."""
    release_connection()  # a tool may take seconds (a fetch): its thread holds no connection meanwhile
    try:
        with telemetry.tool_execution(call.name, call.call_id, call.arguments, not_errors=(InputRequired,)) as execution:
            output = execution.returned(work())
    except InputRequired as asked:
        _ask(call, conversation, asked)
    except ToolError as exc:
        _transition(call, Status.RUNNING, Status.FAILED, error=approved.storable_output(note + str(exc)))
    except Exception as exc:  # a tool's bug is the model's information, not the loop's crash
        logger.exception("tool %s failed", call.name)
        _transition(call, Status.RUNNING, Status.FAILED, error=approved.storable_output(f"{note}{exc.__class__.__name__}: {exc}"))
    else:
        _transition(call, Status.RUNNING, Status.SUCCEEDED, result=approved.storable_output(note + str(output)), **_undo_fields(call, kept))


def _undo_fields(call: ToolCall, kept) -> dict:
    if kept is None:
        return {}
    undo.none_yet(call)  # its card, pushed now, knows no undo was asked: none can be, before it succeeded
    try:
        return kept()
    except Exception:  # what the call left could not be read: it ran, and cannot be undone
        logger.warning("could not keep what a call left, to undo it", exc_info=True)
        return {"undo_state": {"kept": None, "why": "what it left could not be read"}}


def _ask(call: ToolCall, conversation: Conversation, asked: InputRequired) -> None:
    """The tool asked a human for input: the call waits, its question is a call of its own in the
    turn (`asked_by`, never shown to the model) with a question pause like ask_human's, and what
    the tool needs to go on is kept on the call. All in one transaction: a crash leaves neither half.
    The answer shapes what the call does, so it is for whoever may decide the call: a four-eyes
    call's question needs four eyes too (an approver other than the requester answers it)."""
    turn = call.message
    gate = getattr(call, "approval", None) if call.is_gated else None
    checked = check_round(call, conversation, asked.actions) if asked.actions else None  # the rules read before the writes
    with transaction.atomic():
        if not _transition(call, Status.RUNNING, Status.WAITING_FOR_INPUT, push=False, input_state=asked.state):
            return
        if checked is not None:
            store_round(call, conversation, checked, approver_required=gate is not None and gate.approver_required)
            load_calls(turn)
            live.push(live.conversation_group(conversation.pk), lambda: fragments.message_html(turn, replace=True))
            return
        rounds = call.input_requests.count()
        question = ToolCall.objects.create(
            message=turn,
            position=turn.tool_calls.count(),
            call_id=f"{call.call_id[:150]}~input-{rounds + 1}",
            name=call.name,
            status=Status.PENDING_APPROVAL,
            is_gated=True,
            asked_by=call,
        )
        question.approval = request_approval(
            tool_call_id=question.pk,
            conversation_id=conversation.pk,
            requested_by_id=conversation.owner_id,
            reason=f"{call.name} asks for input before it can finish.",
            risk="low",
            arguments_hash=question.arguments_hash,
            approver_required=gate is not None and gate.approver_required,
            timeout_seconds=conversation.agent.approval_timeout_seconds,
            kind=Approval.Kind.QUESTION,
            request=asked.question,
        )
        load_calls(turn)
        # The question is a new card in the turn: the turn is pushed whole, in place of the one shown.
        live.push(live.conversation_group(conversation.pk), lambda: fragments.message_html(turn, replace=True))


def _resume(call: ToolCall, conversation: Conversation) -> None:
    """A call whose tool asked for input goes on once its question is settled: answered, declined,
    expired or stopped (the tool is told which); a tool that asked for calls to be decided, once
    every call of the round is (chat.asked). The claim is the same: waiting → running."""
    asked = latest_round(call)
    for child in asked:
        _apply_decision(child)  # a decision the receiver has not copied yet
    if not asked or any(child.status == Status.PENDING_APPROVAL for child in asked):
        return
    answer = round_answer(asked) if is_decision_round(asked) else approved.input_answer(asked[0].approval)
    if not _transition(call, Status.WAITING_FOR_INPUT, Status.RUNNING):
        return
    for child in asked:  # the claim passes the approved calls on: the tool runs them, or not
        if child.status == Status.APPROVED:
            _transition(child, Status.APPROVED, Status.SUCCEEDED, result=passed_on(call))
    live.flush()
    spec = _spec(call, conversation)
    if spec is None:
        _transition(call, Status.RUNNING, Status.FAILED, error=f"Not run: {call.name} is no longer available to this agent.")
        return
    approval = getattr(call, "approval", None) if call.is_gated else None
    arguments = approval.edited_arguments if approval is not None and approval.is_edited else call.arguments
    context = tool_context(conversation, idempotency_key=str(approval.pk) if approval else f"call-{call.pk}", call=call)
    _invoke(call, conversation, lambda: spec.resume(arguments, context, call.input_state, answer))


# --- Stopping and finishing --------------------------------------------------------------------


def _wait_for_approval(conversation: Conversation, turn: Message, token: str) -> bool:
    with transaction.atomic():
        # Locked and read again: a decision that committed after our first read must not leave the
        # conversation waiting for nothing (its receiver saw `running` and did not enqueue).
        lock_conversation(conversation)
        if not Approval.objects.filter(tool_call__message=turn, status=Approval.Status.PENDING).exists():
            return True
        _set_status(conversation, Conversation.Status.WAITING_FOR_APPROVAL, token)
    return False


def _finish(conversation: Conversation, turn: Message | None, token: str) -> bool:
    with transaction.atomic():
        # A message posted while we were deciding there is nothing to do must not be left unanswered.
        # (Only a user can have added one: new turns are written by the lease holder, us.)
        lock_conversation(conversation)
        if _has_unanswered_input(conversation, turn):
            return True
        _set_status(conversation, Conversation.Status.IDLE, token)
    return False


STOPPED_BY = "Stopped by "  # how the Stop's notice begins (agentlink reads a stopped turn by it)


def stop(conversation: Conversation, *, user) -> list[ToolCall]:
    """Cancel the calls of the open turn that have not started, and leave the conversation idle, in
    the caller's transaction (whose approvals were cancelled first). A call already running
    finishes, unless its tool is `stoppable` (a remote agent's: what it started there is ended once
    the Stop is committed, and what it returns after is not its result); a model answer in flight
    is discarded when it lands (the lease is gone)."""
    lock_conversation(conversation)
    turn = _last_assistant_message(conversation)
    cancelled = []
    who = user.get_username()
    # An approval request's approved call runs where its caller is, maybe already: not ours to cancel.
    stoppable = (Status.PENDING_APPROVAL, Status.WAITING_FOR_INPUT) if conversation.source == Conversation.Source.API else (
        Status.PENDING_APPROVAL, Status.APPROVED, Status.WAITING_FOR_INPUT
    )
    for call in turn.tool_calls.all() if turn is not None else []:
        # Conditional, like every transition: a worker claiming the call (approved → running) or a
        # decision landing on it wins or loses as a whole.
        started = call.status == Status.WAITING_FOR_INPUT or (call.status == Status.RUNNING and _is_stoppable(call, conversation))
        if (call.status in stoppable or started) and _transition(
            call, call.status, Status.CANCELLED, push=False, result=_cancelled_result(who, running=call.status == Status.RUNNING)
        ):
            cancelled.append(call)
            if started:  # what its tool started elsewhere (a remote task) is ended once the Stop is committed
                transaction.on_commit(lambda call=call: _cancel_started(call, conversation))
    if cancelled:
        load_calls(turn)  # with the approvals as the Stop left them
        live.push(live.conversation_group(conversation.pk), lambda: _cards_html(turn))
    active = (Conversation.Status.RUNNING, Conversation.Status.WAITING_FOR_APPROVAL)
    # An idle or failed conversation with nothing to cancel is left as it is (a failure keeps its Retry).
    if Conversation.objects.filter(pk=conversation.pk, status__in=active).update(
        status=Conversation.Status.IDLE, error="", advancing_token="", advancing_until=None, updated_at=timezone.now()
    ) or cancelled:
        conversation.status, conversation.error = Conversation.Status.IDLE, ""
        # A message held while the calls waited was promised an answer once they were decided: say
        # that the Stop kept that promise from being kept, and what becomes of the message.
        held = bool(cancelled) and conversation.messages.filter(
            role=Message.Role.USER, in_model_context=True, position__gt=turn.position
        ).exists()
        unanswered = " What you wrote while the calls waited was not answered: the agent reads it with your next message." if held else ""
        add_notice(conversation, f"{STOPPED_BY}{who}.{unanswered}")
        push_status(conversation)
    return cancelled


def _spec(call: ToolCall, conversation: Conversation):
    if call.undo_of_id is not None:
        return undo.UNDO  # an undo runs whatever tools the agent has now (chat.undo)
    return registry.get(call.name) or registry.find(conversation.agent, call.name)


def _is_stoppable(call: ToolCall, conversation: Conversation) -> bool:
    spec = _spec(call, conversation)
    return spec is not None and spec.stoppable


def _cancel_started(call: ToolCall, conversation: Conversation) -> None:
    """End what the stopped call's tool started elsewhere, as recorded now that the Stop is committed:
    a running tool that records it later finds the call stopped and ends it itself (ToolContext.started)."""
    state = ToolCall.objects.filter(pk=call.pk).values_list("input_state", flat=True).first()
    spec = _spec(call, conversation)
    try:
        if spec is not None and state:
            spec.cancel(call.arguments, tool_context(conversation), state)
    except Exception:  # the Stop stands whatever the tool does
        logger.exception("cancelling what %s started failed", call.name)


def _cancelled_result(who: str, *, running: bool = False) -> str:
    """A cancelled call's one result for the model (the scripted model reads "Cancelled by")."""
    if running:
        return f"Cancelled by {who} (Stop) while it ran: what it had started was cancelled, and what it does after is not its result."
    return f"Cancelled by {who} (Stop) before it ran."


def _cards_html(turn: Message) -> str:
    return "".join(fragments.tool_card_html(call, oob=True) for call in turn.tool_calls.all())


def _fail(conversation: Conversation, token: str, error: str) -> None:
    with transaction.atomic():
        lock_conversation(conversation)
        _set_status(conversation, Conversation.Status.FAILED, token, error=error)


def _set_status(conversation: Conversation, status: str, token: str, error: str = "", *, push: bool = True) -> None:
    """Set the status and give up the lease, in the caller's locked transaction."""
    Conversation.objects.filter(pk=conversation.pk, advancing_token=token).update(
        status=status, error=error, advancing_token="", advancing_until=None, updated_at=timezone.now()
    )
    conversation.status, conversation.error = status, error
    if push:
        push_status(conversation)
    if status in (Conversation.Status.IDLE, Conversation.Status.FAILED):
        transaction.on_commit(lambda: _tell_settled(conversation), robust=True)


def _tell_settled(conversation: Conversation) -> None:
    """Every listener hears that the run ended, whichever of them fails (chat.signals.run_settled)."""
    for receiver, error in run_settled.send_robust(sender=Conversation, conversation=conversation):
        if isinstance(error, Exception):
            logger.error("run_settled: %s failed for %s: %r", receiver, conversation.pk, error, exc_info=error)


# --- What the model sees and says --------------------------------------------------------------


def _last_assistant_message(conversation: Conversation) -> Message | None:
    turn = conversation.messages.filter(role=Message.Role.ASSISTANT).order_by("-position").first()
    if turn is not None:
        load_calls(turn)
    return turn


def _has_unanswered_input(conversation: Conversation, turn: Message | None) -> bool:
    """Tool results the model has not seen yet, or a user message after its last turn."""
    if turn is not None and turn.tool_calls.exists():
        return True
    later = conversation.messages.filter(role=Message.Role.USER, in_model_context=True)
    if turn is not None:
        later = later.filter(position__gt=turn.position)
    return later.exists()


def _call_model(conversation: Conversation, token: str, history: History) -> bool:
    agent = conversation.agent
    tools = [spec.openai_schema() for spec in registry.for_agent(agent)]
    stream = AnswerStream(conversation.pk, token)
    messages = history.for_model()
    release_connection()  # the model takes seconds: this thread holds no connection meanwhile
    try:
        turn = complete(
            model=agent.model,
            messages=messages,
            tools=tools,
            api_base=agent.api_base,
            on_delta=stream.add,
            on_restart=stream.reset,
        )
    except Stopped:  # stopped while the model was answering: nothing of it is kept or shown
        stream.reset()
        return False
    except LLMError as exc:
        stream.reset()
        _fail(conversation, token, str(exc))
        return False
    if turn.tool_calls:
        stream.flush()  # the checks below may take a while (a preview); a final answer's push shows the rest
    # Validated, gated and screened by the rules before the transaction: a preview may ask a tool
    # server (seconds) and a rule's condition is a match of unbounded input, and SQLite's one write
    # lock must wait on neither. Inside: the writes, and the deciding rule's use taken.
    checked = check_calls(conversation, turn)
    stored: list[Message] = []
    try:
        with transaction.atomic():
            if not lease.lock_if_held(conversation, token):
                # Stopped (or taken over) while the model was answering: its answer is discarded.
                live.push(live.conversation_group(conversation.pk), fragments.stream_reset_html(conversation.pk))
                return False
            # Registered first, so that on commit the turn goes out before anything else (the dashboards,
            # the webhooks): the owner is the one waiting. One frame, rendered after the commit from
            # memory: the turn with its cards, the streamed copy cleared, and the status.
            live.push(live.conversation_group(conversation.pk), lambda: _turn_landed_html(conversation, stored[0]))
            message, waits = store_turn(conversation, turn, checked)
            if _user_wrote_meanwhile(conversation, history, message):
                raise _AnsweredWithoutReading  # rolls the turn back, its calls and approvals with it
            stored.append(message)
            more = _after_turn(conversation, message, waits, token)
    except _AnsweredWithoutReading:
        # The user wrote while the model answered: an answer that never read it would sit after it
        # and leave it unanswered. Nothing of the turn ran; the model is asked again, with it.
        stream.reset()
        return True
    stream.cleared()
    return more


class _AnsweredWithoutReading(Exception):
    pass


def _user_wrote_meanwhile(conversation: Conversation, history: History, turn: Message) -> bool:
    """Whether a user's message was stored after the history the model answered was read (before
    `turn`, whose position was taken under the lock). A turn right after that history needs no query."""
    seen = history.messages[-1].position if history.messages else 0
    if turn.position == seen + 1:
        return False
    unread = conversation.messages.filter(role=Message.Role.USER, in_model_context=True, position__gt=seen, position__lt=turn.position)
    return unread.exists()


def _after_turn(conversation: Conversation, turn: Message, waits: bool, token: str) -> bool:
    """In the turn's transaction, under the conversation's lock: a final answer ends the run, and a
    turn whose every call waits for a human leaves the conversation waiting, as the next step would
    (no decision can have landed on approvals this transaction creates). Nobody can have written
    after the turn: its position was taken under the lock. True when there is more to do now."""
    if turn.tool_calls.all() and not waits:
        return True
    status = Conversation.Status.WAITING_FOR_APPROVAL if waits else Conversation.Status.IDLE
    _set_status(conversation, status, token, push=False)  # the turn's frame shows it
    return False


def _turn_landed_html(conversation: Conversation, message: Message) -> str:
    return (
        fragments.message_html(message, oob=True)
        + fragments.stream_reset_html(conversation.pk)
        + fragments.conversation_status_html(conversation)
    )


