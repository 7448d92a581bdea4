"""The demo agent and user that `make run` creates (also used by the tests)."""
from .models import Agent

DEMO_TOOLS = ["list_directory", "read_file", "write_file", "delete_file", "send_email", "calculator", "web_fetch"]


def ensure_demo_agent() -> Agent:
    agent, _ = Agent.objects.update_or_create(
        slug="demo",
        defaults={
            "name": "Demo agent",
            "system_prompt": "You help with files in a sandbox, email, arithmetic and web pages. "
            "Writes, deletes and emails wait for the user's approval.",
            "model": "scripted/demo",
            "tools": DEMO_TOOLS,
            "require_approval": ["write_file", "delete_file", "send_email"],
            "fetch_allowlist": ["example.com", "python.org"],
        },
    )
    return agent
