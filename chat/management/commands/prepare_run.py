from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "What `make run` sets up before it starts the processes, in one process (each command alone "
        "loads Django again: ~2 s each): migrate, setup_demo, setup_demo_tool_servers."
    )

    def handle(self, *args, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        call_command("setup_demo", stdout=self.stdout, stderr=self.stderr)
        call_command("setup_demo_tool_servers", stdout=self.stdout, stderr=self.stderr)
