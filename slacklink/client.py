"""The Slack Web API, through slack_sdk's WebClient pointed at SLACK_API_BASE_URL (Slack's own, or
the tests' stand-in). Every failure a caller must survive is one of ERRORS."""
import logging
import urllib.error

from django.conf import settings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

logger = logging.getLogger(__name__)
ERRORS = (SlackClientError, urllib.error.URLError, OSError, ValueError)
# Answers that say retrying will not help: the person or the channel is gone, or the blocks are wrong.
PERMANENT = {
    "channel_not_found", "not_in_channel", "is_archived", "user_not_found", "user_disabled", "cannot_dm_bot",
    "messages_tab_disabled", "invalid_blocks", "msg_too_long", "msg_blocks_too_long", "no_text",
}


def enabled() -> bool:
    return bool(settings.SLACK_BOT_TOKEN and settings.SLACK_SIGNING_SECRET)


def web(*, timeout: int = 10) -> WebClient:
    return WebClient(token=settings.SLACK_BOT_TOKEN, base_url=settings.SLACK_API_BASE_URL, timeout=timeout)


def error_code(exc: Exception) -> str:
    """Slack's error name ("channel_not_found"), or the exception's own words."""
    if isinstance(exc, SlackApiError) and isinstance(exc.response.data, dict):
        return str(exc.response.data.get("error") or exc.response.status_code)
    return f"{exc.__class__.__name__}: {exc}"


def is_permanent(exc: Exception) -> bool:
    return isinstance(exc, SlackApiError) and error_code(exc) in PERMANENT


def post(channel: str, text: str, blocks: list[dict]) -> tuple[str, str]:
    """Post a message (to a user id: their direct messages with the app); (channel, ts) as Slack answers."""
    answer = web().chat_postMessage(channel=channel, text=text, blocks=blocks, unfurl_links=False, unfurl_media=False)
    return answer["channel"], answer["ts"]


def update(channel: str, ts: str, text: str, blocks: list[dict]) -> None:
    web().chat_update(channel=channel, ts=ts, text=text, blocks=blocks)


def reply(channel: str, thread_ts: str, text: str, blocks: list[dict] | None = None) -> None:
    """A reply in a message's thread (a reminder or a warning under its request)."""
    web().chat_postMessage(channel=channel, thread_ts=thread_ts, text=text, blocks=blocks, unfurl_links=False, unfurl_media=False)


def open_view(trigger_id: str, view: dict) -> None:
    """Open a modal for the person who pressed (within Slack's three seconds of the press)."""
    web(timeout=3).views_open(trigger_id=trigger_id, view=view)


def tell(channel: str, slack_user_id: str, text: str) -> None:
    """An ephemeral message to the person who pressed, in the channel of the press; best effort."""
    if not channel:
        return
    try:
        web(timeout=3).chat_postEphemeral(channel=channel, user=slack_user_id, text=text)
    except ERRORS as exc:
        logger.warning("slack: telling %s %r failed: %s", slack_user_id, text[:80], error_code(exc))
