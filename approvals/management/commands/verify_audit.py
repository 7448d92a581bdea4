"""`manage.py verify_audit`: walk the audit chain of decisions; exit status 1 at the first broken link."""
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS

from approvals import audit


class Command(BaseCommand):
    help = (
        "Check every decision against its hash and the previous decision's, and report the first "
        "broken link (exit status 1). Prints the head: keep it elsewhere and pass it to --expect later."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)
        parser.add_argument(
            "--expect", metavar="POSITION:HASH", type=anchor,
            help="Also check that link POSITION still has HASH (a head printed earlier), which catches "
            "the newest decisions removed or every link rewritten.",
        )

    def handle(self, *args, database: str, expect: tuple[int, str] | None, **options) -> None:
        verdict = audit.verify(using=database, expect=expect)
        if not verdict.is_intact:
            where = verdict.what or (f"approval #{verdict.broken_at}" if verdict.broken_at else "the chain's end")
            link = f" (link {verdict.position})" if verdict.position else ""
            intact = f"the {verdict.decisions} links before it are intact"
            raise CommandError(f"audit chain broken at {where}{link}: {verdict.why}; {intact}", returncode=1)
        self.stdout.write(f"audit chain intact: {verdict.decisions} decisions")
        self.stdout.write(f"head: {verdict.head.position}:{verdict.head.hash}")


def anchor(value: str) -> tuple[int, str]:
    position, _, hash_ = value.partition(":")
    if not position.isdigit() or int(position) < 1 or len(hash_) != 64:
        raise ValueError(value)
    return int(position), hash_.lower()
