"""A card's "via <remote agent>" line: a call a tool asked to be decided (chat.asked) is named
`<remote>__<its tool>` (agentlink.remote.call_name), and runs there once decided here."""
from django import template

from agentlink.models import REMOTE_SEPARATOR

register = template.Library()


@register.filter
def asked_via(call) -> tuple[str, str] | None:
    """(the remote's name, its tool) for a call a remote asked for, else None."""
    if call.asked_by_id is None or not call.is_gated:
        return None
    remote, separator, tool = call.name.partition(REMOTE_SEPARATOR)
    return (remote, tool) if separator and remote and tool else None
