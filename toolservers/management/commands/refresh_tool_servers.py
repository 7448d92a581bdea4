from django.core.management.base import BaseCommand

from toolservers import client, discovery, pins
from toolservers.models import ToolServer


class Command(BaseCommand):
    help = "List the tools of every enabled tool server (or those named) and keep the lists."

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="Only these servers.")

    def handle(self, *args, names, **options):
        servers = ToolServer.objects.filter(enabled=True)
        if names:
            servers = servers.filter(name__in=names)
        failed = 0
        for server in servers.order_by("name"):
            try:
                tools = discovery.refresh(server)
            except client.ServerUnavailable as exc:
                failed += 1
                self.stderr.write(f"{server.name}: {exc}")
            else:
                self.stdout.write(f"{server.name}: {len(tools)} tools ({', '.join(tool['name'] for tool in tools)})")
                if unapproved := pins.unapproved_tools(server):
                    self.stderr.write(
                        f"{server.name}: changed since approved by an admin, disabled until accepted in the admin "
                        f"(Tool definitions): {', '.join(unapproved)}"
                    )
        if failed:
            raise SystemExit(1)
