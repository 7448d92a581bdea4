"""chat's reaction to decisions, in the worker that announces them (approvals.announcements): resume
each conversation whose turn is decided, or move the card on (which pushes it) where other calls of
the turn still wait for a human."""
from core import telemetry

from . import loop, recovery, undo
from .tasks import advance_conversation, run_undo


def on_approvals_decided(sender, approvals, **kwargs) -> None:
    undos = undo.undo_calls([approval.tool_call_id for approval in approvals])
    for tool_call_id in undos:  # outside the model's turn: run (or shown rejected) on their own (chat.undo)
        run_undo.delay(tool_call_id)
    approvals = [approval for approval in approvals if approval.tool_call_id not in undos]
    resumed = set(recovery.resume_decided(approval.conversation_id for approval in approvals))
    for conversation_id in resumed:
        # One task per conversation (an approve-all fans out here). The worker applies the decisions
        # as its first step and pushes the cards then. Applying them here too would only race the
        # worker for the database's write lock.
        with telemetry.resuming(approvals, conversation_id):  # the resumed run joins the trace of the step that asked
            advance_conversation.delay(str(conversation_id))
    for approval in approvals:
        if approval.conversation_id not in resumed:
            # Other calls still wait: the bar counts what is left to decide ("approve all 2" → "yes").
            loop.apply_decision(approval.tool_call_id, with_status=True)


def on_approval_stored(sender, approval, **kwargs) -> None:
    """In the request that decided it: every tab of the conversation shows the decision now, not
    after the worker's two hops (the announcement, then the resumed step)."""
    loop.show_decided(approval.tool_call_id)


def on_approval_edited(sender, approval, **kwargs) -> None:
    """An edit left the call pending (stricter now): every tab shows the new arguments and rule."""
    loop.push_card(approval.tool_call_id)


def on_approval_reviewed(sender, approval, **kwargs) -> None:
    """Its AI reviewer asked a person: every tab shows why, and the card now waits for them."""
    loop.push_card(approval.tool_call_id)


def on_approvals_expiring(sender, approvals, **kwargs) -> None:
    """Their deadline is near: every tab shows the card's warning, with its Extend button."""
    for approval in approvals:
        loop.push_card(approval.tool_call_id)


def on_approval_extended(sender, approval, **kwargs) -> None:
    """Every tab shows the new deadline, and who extended it."""
    loop.push_card(approval.tool_call_id)
