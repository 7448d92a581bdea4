from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from chat.models import ApiToken


class Command(BaseCommand):
    help = "Print a new API token for a user (use it as 'Authorization: Bearer <token>')."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")

    def handle(self, *args, username: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        self.stdout.write(ApiToken.issue(user))
