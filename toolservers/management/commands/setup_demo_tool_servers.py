from django.core.management.base import BaseCommand

from chat.models import Agent
from toolservers import client, discovery
from toolservers.demo import ensure_git_server, ensure_notes_server


class Command(BaseCommand):
    help = (
        "Give the demo agent the demo tool servers (`notes`, `git`) and list their tools: once, when a server "
        "has never been listed (or its last listing failed); `--refresh` (or `manage.py refresh_tool_servers`) lists them again."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--refresh", action="store_true", help="List every demo server's tools again, even if listed before.")

    def handle(self, *args, refresh: bool = False, **options) -> None:
        agent = Agent.objects.get(slug="demo")
        for server in (ensure_notes_server(agent), ensure_git_server(agent)):
            if server.refreshed_at is not None and not server.refresh_error and not refresh:
                # Starting each server to ask it again took ~5 s of every `make run`; a listing that
                # changed is caught anyway where tools are offered (pinned definitions).
                self.stdout.write(f"tool server {server.name}: {len(server.tools or [])} tools for {agent.name} (listed before)")
                continue
            try:
                tools = discovery.refresh(server)
            except client.ServerUnavailable as exc:
                self.stderr.write(f"tool server {server.name}: {exc}")
            else:
                self.stdout.write(f"tool server {server.name}: {len(tools)} tools for {agent.name}")
