"""chat's reaction to a decision: move the card on (which pushes it), resume once the turn is decided."""
from . import loop, recovery
from .tasks import advance_conversation


def on_approval_decided(sender, approval, **kwargs) -> None:
    loop.apply_decision(approval.tool_call_id)
    if recovery.resume_if_decided(approval.conversation_id):
        advance_conversation.delay(str(approval.conversation_id))
