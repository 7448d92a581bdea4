from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from slacklink.accounts import issue_code


class Command(BaseCommand):
    help = "Print a one-time code that links a Slack account to the user (send /hitl link <code> in Slack)."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {username!r}.")
        self.stdout.write(f"Send in Slack: /hitl link {issue_code(user)}")
