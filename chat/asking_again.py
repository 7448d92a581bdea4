"""Asking an expired approval again (approvals.services.ask_again): the same call, in a new turn of
its conversation, with a new approval for the same version, without asking the model again. The
old call keeps its one result (the model was told it timed out); the new one gets its own."""
import uuid

from django.db import transaction
from django.utils import timezone

from approvals.policy import explain
from approvals.models import Approval
from approvals.services import CannotAskAgain, request_approval
from core import live

from . import fragments, loop
from .messages import append_message, lock_conversation, push_status, set_loaded_calls
from .models import Conversation, ToolCall
from .tools import registry


def ask_again(expired: Approval, *, user) -> Approval:
    """A new assistant turn holding one call with the expired call's name, arguments and hash (a new
    call id), and its pending approval, linked to the expired one, with the same reason, risk, four
    eyes, preview, route and edit. A chat conversation then waits for it, and the loop runs the call
    once it is decided, as any call; an outside agent's request stays with its caller, who finds the
    new approval through `asked_again` on the old one. Raises CannotAskAgain."""
    old = expired.tool_call
    conversation = Conversation.objects.select_related("agent").get(pk=expired.conversation_id)
    if conversation.source == Conversation.Source.MCP:
        raise CannotAskAgain("An MCP client's call is not asked again: its client was told it timed out, and calls again itself.")
    if old.asked_by_id is not None:
        raise CannotAskAgain("A tool's own question is not asked again: the call that asked it has its answer (none).")
    with transaction.atomic():
        # Under the conversation's lock: two askers (two tabs) make one new approval, and no turn of the loop starts meanwhile.
        lock_conversation(conversation)
        conversation.refresh_from_db(fields=["status"])
        if again := Approval.objects.filter(asked_again_from=expired).first():
            raise CannotAskAgain(f"Approval {expired.pk} was already asked again, as approval {again.pk}.")
        if not conversation.is_outside and conversation.status != Conversation.Status.IDLE:
            raise CannotAskAgain(_busy(conversation))
        author = conversation.owner if conversation.is_outside else None  # as chat.outside writes an outside turn
        message = append_message(conversation, role="assistant", content="", push=False, locked=True, author=author)
        call = ToolCall.objects.create(
            message=message, position=0, call_id=f"again_{uuid.uuid4().hex[:24]}", name=old.name, arguments=old.arguments,
            raw_arguments=old.raw_arguments, arguments_hash=old.arguments_hash, is_gated=True, status=ToolCall.Status.PENDING_APPROVAL,
        )
        call.approval = request_approval(
            tool_call_id=call.pk, conversation_id=conversation.pk, requested_by_id=expired.requested_by_id, reason=expired.reason,
            risk=expired.risk, arguments_hash=expired.arguments_hash, approver_required=expired.approver_required,
            timeout_seconds=_timeout(expired, conversation), preview=expired.preview, preview_state=expired.preview_state,
            confirmation_hint=expired.confirmation_hint, kind=expired.kind, request=expired.question or expired.plan,
            rule_suggestion=expired.rule_suggestion, annotations=expired.annotations, route=expired.route,
            rule=expired.rule if expired.rule_id else None, explanation=_explanation(expired, user), asked_again_from=expired,
        )
        set_loaded_calls(message, [call])
        if not conversation.is_outside:
            Conversation.objects.filter(pk=conversation.pk).update(status=Conversation.Status.WAITING_FOR_APPROVAL, updated_at=timezone.now())
            conversation.status = Conversation.Status.WAITING_FOR_APPROVAL
            push_status(conversation)
        group = live.conversation_group(conversation.pk)
        live.push(group, lambda: fragments.message_html(message, oob=True))
        transaction.on_commit(lambda: loop.push_card(old.pk))  # the old card says it was asked again
    return call.approval


def _busy(conversation: Conversation) -> str:
    if conversation.status == Conversation.Status.WAITING_FOR_APPROVAL:
        return "Other calls of this conversation wait for a decision: decide them first, then ask this one again."
    if conversation.status == Conversation.Status.FAILED:
        return "This conversation's last run failed: retry it first, then ask this call again."
    return "The agent is working in this conversation: ask again once its turn has ended."


def _timeout(expired: Approval, conversation: Conversation) -> int | None:
    """The wait the policy gives the call now (the tool's own, else the agent's), as the gate would;
    for a tool the agent no longer has, the expired approval's first wait."""
    spec = registry.find(conversation.agent, expired.tool_call.name)
    timeout = (spec.approval_timeout if spec is not None else None) or conversation.agent.approval_timeout_seconds
    if timeout:
        return timeout
    return int((expired.expires_at - expired.requested_at).total_seconds()) if expired.expires_at and not expired.extended_at else None


def _explanation(expired: Approval, user) -> list[dict]:
    when = expired.decided_at.strftime("%H:%M UTC") if expired.decided_at else "its deadline"
    again = explain.step(
        "asked again", f"approval #{expired.pk}",
        f"Asked again by {user.get_username()} after approval #{expired.pk} expired at {when}: the same call and version; the model was not asked again.",
    )
    return explain.steps_of(expired) + [again]
