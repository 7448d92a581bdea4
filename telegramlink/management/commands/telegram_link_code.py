from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from telegramlink.accounts import issue_code


class Command(BaseCommand):
    help = "Print a one-time code that links a Telegram account to the user (send /start <code> to the bot)."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        self.stdout.write(f"Send to the bot: /start {issue_code(user)}")
