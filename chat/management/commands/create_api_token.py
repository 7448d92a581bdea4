from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from chat.models import ApiToken


class Command(BaseCommand):
    help = (
        "Print a new API token for a user (use it as 'Authorization: Bearer <token>'). A person's "
        "token decides as its user (--scope decide, the default); give a program (an MCP client, an "
        "outside agent, an A2A client) one that only asks and reads outcomes (--scope ask)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--scope", choices=ApiToken.Scope.values, default=ApiToken.Scope.DECIDE)

    def handle(self, *args, username: str, scope: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        self.stdout.write(ApiToken.issue(user, scope=scope))
