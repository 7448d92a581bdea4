"""Django's `flush`, allowed to delete decided approvals and finished tool calls, which the
database's triggers otherwise refuse: it empties every table, the audit's with the rest. The test
suite flushes between transactional tests; nothing else in the app deletes decisions."""
from django.core.management.commands import flush

from approvals.audit.triggers import erasing


class Command(flush.Command):
    def handle(self, **options) -> None:
        with erasing(options["database"]):
            super().handle(**options)
