"""chat's reaction to a decision: resume once the turn is decided, or move the card on (which pushes it)."""
from . import loop, recovery
from .tasks import advance_conversation


def on_approval_decided(sender, approval, **kwargs) -> None:
    if recovery.resume_if_decided(approval.conversation_id):
        # The worker applies the decision as its first step and pushes the card then. Applying it
        # here too would only race the worker for the database's write lock.
        advance_conversation.delay(str(approval.conversation_id))
    else:
        loop.apply_decision(approval.tool_call_id)  # other calls of the turn still wait for a human
