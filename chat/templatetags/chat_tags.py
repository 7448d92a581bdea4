from django import template

from approvals.inbox import voted
from approvals.models import Approval
from approvals.permissions import can_decide
from approvals.selectors import powers_for
from chat.models import Conversation, Message, ToolCall

register = template.Library()


@register.simple_tag(takes_context=True)
def viewer_may(context, approval) -> dict:
    """What the viewer of this page may do with `approval` (the decision service checks again):
    `decide` (approve: not once their vote counts), `reject`, and whether they `voted`. One Powers
    for the whole render (stashed on the request), however many cards."""
    request = context["request"]
    powers = powers_for(request)
    has_voted = voted(request.user, approval)
    return {
        "decide": not has_voted and can_decide(request.user, approval, powers=powers),
        "reject": can_decide(request.user, approval, approve=False, powers=powers),
        "voted": has_voted,
    }


@register.simple_tag
def may_decide_unknown(approval) -> bool | None:
    """For a pushed card, whose viewers differ: None when only an approver may decide, so the card
    carries both the buttons and "Waiting for an approver" and the page shows the right one."""
    return None if approval.approver_required else True


OUTSIDE_CALL_IDS = tuple(f"{source}-" for source in Conversation.Source.values if source != Conversation.Source.CHAT)


@register.filter
def call_source(call) -> str:
    """Where a card's call comes from: the Conversation.source of its turn ("chat", "api", "mcp").
    chat.outside names its calls "<source>-<uuid>", so a call named otherwise is the loop's, with no
    query (the loop pushes cards whose turn comes without its conversation); an outside one is read
    from what its render path loaded (the page's turns, a reported outcome's approval)."""
    if not call.call_id.startswith(OUTSIDE_CALL_IDS):
        return Conversation.Source.CHAT
    if ToolCall.message.is_cached(call) and Message.conversation.is_cached(call.message):
        return call.message.conversation.source
    approval = ToolCall.approval.related.get_cached_value(call, default=None)
    if approval is not None and Approval.conversation.is_cached(approval):
        return approval.conversation.source
    return call.message.conversation.source


@register.filter
def undo_line(call) -> dict | None:
    """What a card or a history row says of undoing the call (chat.undo): None for an undo itself;
    {"can": False} for a tool that cannot undo; else its window and its undo, if asked
    (`call.undos` prefetched, on a page of many)."""
    from chat import undo
    from chat.tools import registry

    if call is None or call.undo_of_id is not None:
        return None
    if not undo.reversible(registry.get(call.name)):
        return {"can": False}
    # Only a call that kept something to put back has undos (prefetched where many are shown).
    undos = [u for u in call.undos.all() if u.status not in undo.NOT_UNDONE] if call.undo_until is not None else []
    return {
        "can": True, "ran": call.status == ToolCall.Status.SUCCEEDED, "until": call.undo_until,
        "open": call.status == ToolCall.Status.SUCCEEDED and not undos and not undo.why_not(call),
        "undo": undos[-1] if undos else None,
    }
