"""The development transport: long-poll getUpdates and handle each update (make run starts it).
Without TELEGRAM_BOT_TOKEN, or with TELEGRAM_WEBHOOK_URL set, it idles (honcho stops every
process when one exits)."""
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


class Command(BaseCommand):
    help = "Receive Telegram updates by polling (development; production uses the webhook)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="One getUpdates round, then exit.")

    def handle(self, *args, once: bool = False, **options):
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        if not bot.enabled() or settings.TELEGRAM_WEBHOOK_URL:
            why = "TELEGRAM_WEBHOOK_URL is set" if bot.enabled() else "TELEGRAM_BOT_TOKEN is not set"
            self.stdout.write(f"Telegram polling is off ({why}).")
            while not stopping and not once:
                time.sleep(1)
            return
        self.stdout.write("Polling Telegram for updates.", ending="\n")
        self.stdout.flush()
        asyncio.run(self._poll(stopping, once))

    async def _poll(self, stopping: list, once: bool) -> None:
        offset, delay = None, 1.0
        async with bot.make_bot(read_timeout=POLL_SECONDS + 10) as telegram:
            while not stopping:
                try:
                    batch = await telegram.get_updates(
                        offset=offset, timeout=POLL_SECONDS, allowed_updates=["message", "callback_query"]
                    )
                    delay = 1.0
                except TelegramError as exc:  # Telegram (or the network) is down: wait, then again
                    logger.warning("telegram: getUpdates failed: %s", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 30)
                    continue
                for update in batch:
                    offset = update.update_id + 1
                    # Handled in a thread: the decision service and the Bot API calls are sync.
                    await asyncio.to_thread(updates.handle, update.to_dict())
                if once:
                    return
