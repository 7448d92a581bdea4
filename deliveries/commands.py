"""The `<channel>_link_code` management commands, written once: print a one-time code that links
an outside account to a user, and what to send where."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class LinkCodeCommand(BaseCommand):
    # "Send in Slack: /hitl link {code}": where to send the code, and how.
    instructions = ""

    def issue(self, user) -> str:
        raise NotImplementedError

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        self.stdout.write(self.instructions.format(code=self.issue(user)))
