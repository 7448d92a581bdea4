"""chat's reaction to a decision: update the card everywhere, and resume once the turn is decided."""
from hitl import live

from . import fragments, loop, recovery
from .tasks import advance_conversation


def on_approval_decided(sender, approval, **kwargs) -> None:
    call = loop.apply_decision(approval.tool_call_id)
    if call is not None:
        live.push_now(live.conversation_group(approval.conversation_id), fragments.tool_card_html(call, oob=True))
    if recovery.resume_if_decided(approval.conversation_id):
        advance_conversation.delay(str(approval.conversation_id))
