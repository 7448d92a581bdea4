from django.core.management.base import BaseCommand

from chat.models import Agent
from toolservers import client, discovery
from toolservers.demo import ensure_git_server, ensure_notes_server


class Command(BaseCommand):
    help = "Give the demo agent the demo tool servers (`notes`, `git`) and list their tools."

    def handle(self, *args, **options) -> None:
        agent = Agent.objects.get(slug="demo")
        for server in (ensure_notes_server(agent), ensure_git_server(agent)):
            try:
                tools = discovery.refresh(server)
            except client.ServerUnavailable as exc:
                self.stderr.write(f"tool server {server.name}: {exc}")
            else:
                self.stdout.write(f"tool server {server.name}: {len(tools)} tools for {agent.name}")
