"""The development transport: long-poll getUpdates and handle each update (make run starts it).
Without TELEGRAM_BOT_TOKEN, or with TELEGRAM_WEBHOOK_URL set, it idles, and with the Bot API
unreachable it waits and tries again (honcho stops every process when one exits)."""
import asyncio
import logging
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from telegram.error import TelegramError

from telegramlink import bot, updates

logger = logging.getLogger(__name__)
POLL_SECONDS = 25
MAX_DELAY_SECONDS = 30


class Command(BaseCommand):
    help = "Receive Telegram updates by polling (development; production uses the webhook)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="One getUpdates round, then exit.")

    def handle(self, *args, once: bool = False, **options):
        stopping = []
        previous = signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        try:
            if not bot.enabled() or settings.TELEGRAM_WEBHOOK_URL:
                why = "TELEGRAM_WEBHOOK_URL is set" if bot.enabled() else "TELEGRAM_BOT_TOKEN is not set"
                self.stdout.write(f"Telegram polling is off ({why}).")
                while not stopping and not once:
                    time.sleep(1)
                return
            asyncio.run(self._poll(stopping, once))
        finally:
            signal.signal(signal.SIGTERM, previous)

    async def _poll(self, stopping: list, once: bool) -> None:
        """Poll until SIGTERM. The Bot API down, at start or later, is waited out with backoff (one
        line logged per failure), never an exit: honcho would stop the whole stack with it."""
        offset, delay, ready = None, 1.0, False
        telegram = bot.make_bot(read_timeout=POLL_SECONDS + 10)
        try:
            while not stopping:
                try:
                    if not ready:
                        await telegram.initialize()  # getMe: fails while the Bot API is unreachable
                        ready = True
                        self.stdout.write("Polling Telegram for updates.")
                        self.stdout.flush()
                    batch = await telegram.get_updates(
                        offset=offset, timeout=POLL_SECONDS, allowed_updates=["message", "callback_query"]
                    )
                    delay = 1.0
                except TelegramError as exc:  # Telegram (or the network) is down: wait, then again
                    logger.warning("telegram: %s failed, again in %.0f s: %s", "getUpdates" if ready else "getMe", delay, exc)
                    await _wait(delay, stopping)
                    delay = min(delay * 2, MAX_DELAY_SECONDS)
                    continue
                for update in batch:
                    offset = update.update_id + 1
                    # Handled in a thread: the decision service and the Bot API calls are sync.
                    await asyncio.to_thread(updates.handle, update.to_dict())
                if once:
                    return
        finally:
            await telegram.shutdown()


async def _wait(seconds: float, stopping: list) -> None:
    """Sleep, but wake for SIGTERM at once (honcho kills what does not stop within seconds)."""
    deadline = time.monotonic() + seconds
    while not stopping and time.monotonic() < deadline:
        await asyncio.sleep(min(0.1, deadline - time.monotonic()))
