"""`manage.py import_policy FILE`: show what a policy file would change (a dry run, the default), or
apply it with --apply, in one transaction recorded as one policy version."""
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from approvals.policy import files as policy_files


class Command(BaseCommand):
    help = "Compare a policy YAML file with the database and print the differences; --apply makes them."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="A file as export_policy writes it ('-' for standard input).")
        parser.add_argument("--apply", action="store_true", help="Make the changes (without it nothing changes).")
        parser.add_argument("--by", default="", help="The username the policy version names as its author.")

    def handle(self, *args, file: str, apply: bool, by: str, **options) -> None:
        user = None
        if by and (user := get_user_model().objects.filter(username=by).first()) is None:
            raise CommandError(f"--by: unknown user {by!r}")
        try:
            text = sys.stdin.read() if file == "-" else open(file, encoding="utf-8").read()  # noqa: SIM115
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"{file}: {error}") from None
        try:
            changes, notes = policy_files.plan(policy_files.load(text))
        except policy_files.PolicyFileError as error:
            raise CommandError(f"{file}: {error}; nothing changed") from None
        for note in notes:
            self.stderr.write(note)
        if not changes:
            self.stdout.write("no changes")
            return
        for change in changes:
            self.stdout.write(change.text)
        if not apply:
            self.stdout.write(f"{len(changes)} changes (a dry run: nothing changed; --apply to make them)")
            return
        policy_files.apply(changes, user=user, note=f"import_policy {file}")
        self.stdout.write(f"applied {len(changes)} changes")
