"""One function per partial: the same HTML for the page and for the websocket push."""
from django.template.loader import render_to_string
from django.utils.html import format_html

from .models import Conversation, Message, ToolCall


def message_html(message: Message, *, oob: bool = False) -> str:
    """A message with its tool cards; `message.tool_calls` should be prefetched with their approvals."""
    return render_to_string("partials/message.html", {"message": message, "oob": oob})


def tool_card_html(call: ToolCall, *, oob: bool = False) -> str:
    return render_to_string("partials/tool_call_card.html", {"call": call, "oob": oob})


def conversation_status_html(conversation: Conversation, *, oob: bool = True) -> str:
    return render_to_string("partials/conversation_status.html", {"conversation": conversation, "oob": oob})


def stream_delta_html(conversation_id, text: str) -> str:
    """Streamed text appended to the reply being written; escaped like everything from the model."""
    return format_html('<span hx-swap-oob="beforeend:#stream-{}">{}</span>', conversation_id, text)


def stream_reset_html(conversation_id) -> str:
    return format_html('<div id="stream-{}" class="streaming" hx-swap-oob="true"></div>', conversation_id)
