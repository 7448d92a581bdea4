from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from telegramlink import bot
from telegramlink.views import webhook_secret


class Command(BaseCommand):
    help = "Tell Telegram where to post updates (set <public base URL>), or to stop (delete)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["set", "delete"])
        parser.add_argument("public_url", nargs="?", default=settings.TELEGRAM_WEBHOOK_URL)

    def handle(self, *args, action: str, public_url: str, **options):
        if not bot.enabled():
            raise CommandError("TELEGRAM_BOT_TOKEN is not set.")
        if action == "delete":
            bot.call(lambda b: b.delete_webhook())
            self.stdout.write("Webhook deleted: run the poller (make run) to receive updates.")
            return
        if not public_url.startswith("https://"):
            raise CommandError("Telegram posts only to an https:// URL: give the site's public base URL.")
        url = public_url.rstrip("/") + reverse("telegramlink:webhook", args=[webhook_secret("path")])
        bot.call(lambda b: b.set_webhook(url, secret_token=webhook_secret("header"), allowed_updates=["message", "callback_query"]))
        self.stdout.write(f"Webhook set: {public_url.rstrip('/')}/telegram/webhook/<secret>/")
