"""The Bot API, through python-telegram-bot's `Bot` (no application runner: our own Celery tasks,
webhook view and poller drive it). Sync callers get `call(...)`: each opens the bot, makes the
request and closes it, in an event loop of its own."""
import asyncio
import concurrent.futures
import functools
import logging
import ssl

import httpx

from django.conf import settings
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, Forbidden, TelegramError  # noqa: F401  (callers catch these)
from telegram.request import HTTPXRequest

logger = logging.getLogger(__name__)


def enabled() -> bool:
    return bool(settings.TELEGRAM_BOT_TOKEN)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context a process: loading the CA bundle costs about 45 ms, each time."""
    return httpx.create_ssl_context()


def make_bot(*, read_timeout: float = 10) -> Bot:
    tls = {"verify": _tls()}
    return Bot(
        settings.TELEGRAM_BOT_TOKEN,
        base_url=f"{settings.TELEGRAM_API_BASE_URL}/bot",
        base_file_url=f"{settings.TELEGRAM_API_BASE_URL}/file/bot",
        request=HTTPXRequest(connect_timeout=5, read_timeout=10, httpx_kwargs=tls),
        get_updates_request=HTTPXRequest(connect_timeout=5, read_timeout=read_timeout, httpx_kwargs=tls),
    )


def call(work):
    """Run `work(bot)` (a coroutine function) to its end and return what it returns."""

    async def run():
        async with make_bot() as bot:
            return await work(bot)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from async code: a loop of its own
        return pool.submit(asyncio.run, run()).result()


def keyboard(rows: list[list[tuple[str, str]]]) -> InlineKeyboardMarkup | None:
    """Rows of (text, callback_data) buttons; one whose data is an http(s) address opens it instead
    (our callback data are short actions, never an address)."""
    if not rows:
        return None
    return InlineKeyboardMarkup([[_button(text, data) for text, data in row] for row in rows])


def _button(text: str, data: str) -> InlineKeyboardButton:
    if data.startswith(("https://", "http://")):
        return InlineKeyboardButton(text, url=data)
    return InlineKeyboardButton(text, callback_data=data)


def send(chat_id: int, text: str, buttons: list[list[tuple[str, str]]] | None = None, *, reply_to: int | None = None) -> int:
    """Send an HTML message (as a reply to message `reply_to`, if it is still there); its message_id."""
    replying = ReplyParameters(reply_to, allow_sending_without_reply=True) if reply_to else None
    message = call(lambda bot: bot.send_message(
        chat_id, text, parse_mode=ParseMode.HTML, reply_markup=keyboard(buttons or []), disable_web_page_preview=True,
        reply_parameters=replying,
    ))
    return message.message_id


def edit(chat_id: int, message_id: int, text: str, buttons: list[list[tuple[str, str]]] | None = None) -> None:
    """Replace a message's text, and its buttons with `buttons` (none: they go)."""
    try:
        call(lambda bot: bot.edit_message_text(
            text, chat_id=chat_id, message_id=message_id, parse_mode=ParseMode.HTML, disable_web_page_preview=True,
            reply_markup=keyboard(buttons or []),
        ))
    except BadRequest as exc:
        if "not modified" not in str(exc).lower():  # edited already (by a twin task): done
            raise


def answer_press(query_id: str, text: str) -> None:
    """Answer a callback query (always: the button stops spinning); best effort."""
    try:
        call(lambda bot: bot.answer_callback_query(query_id, text=text[:200], show_alert=len(text) > 60))
    except TelegramError as exc:
        logger.warning("telegram: answering a press failed: %s", exc)


def reply(chat_id: int, text: str, buttons: list[list[tuple[str, str]]] | None = None) -> None:
    """A message to a chat (the bot's answers to commands, presses and typed replies); best effort."""
    try:
        call(lambda bot: bot.send_message(
            chat_id, text, parse_mode=ParseMode.HTML, disable_web_page_preview=True, reply_markup=keyboard(buttons or []),
        ))
    except TelegramError as exc:
        logger.warning("telegram: a reply to %s failed: %s", chat_id, exc)
