"""One function per partial: the same HTML for the page and for the websocket push."""
from django.template.loader import render_to_string
from django.utils.html import format_html

from .models import Conversation, Message, ToolCall


def message_html(message: Message, *, oob: bool = False, replace: bool = False) -> str:
    """A message with its tool cards (prefetch `tool_calls__approval__decided_by`). Pushed, it is
    appended to #messages: htmx appends the wrapper's children; with `replace`, it takes the place
    of the message the page shows (a card added to a turn has no element of its own to swap yet)."""
    html = render_to_string("partials/message.html", {"message": message, "replace": replace})
    return format_html('<div hx-swap-oob="beforeend:#messages">{}</div>', html) if oob else html


def tool_card_html(call: ToolCall, *, oob: bool = False, approve_all: bool = True) -> str:
    """A card; pushed, it comes with its turn's "Approve all (N)", which its decision may change
    (`approve_all=False`: a change that leaves what it counts as it was, a call that was not pending)."""
    html = render_to_string("partials/tool_call_card.html", {"call": call, "oob": oob})
    if oob and approve_all:
        html += approve_all_html(call.message, oob=True)
    return html


def approve_all_html(message: Message, *, oob: bool = False) -> str:
    return render_to_string("partials/approve_all.html", {"message": message, "oob": oob})


def conversation_status_html(conversation: Conversation, *, oob: bool = True) -> str:
    return render_to_string("partials/conversation_status.html", {"conversation": conversation, "oob": oob})


def stream_delta_html(conversation_id, text: str) -> str:
    """Streamed text appended to the reply being written; escaped like everything from the model."""
    return format_html('<span hx-swap-oob="beforeend:#stream-{}">{}</span>', conversation_id, text)


def stream_reset_html(conversation_id) -> str:
    return format_html('<div id="stream-{}" class="streaming" aria-live="polite" hx-swap-oob="true"></div>', conversation_id)
