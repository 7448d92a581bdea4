"""The demo tool servers that `make run` adds to the demo agent (also used by the tests)."""
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from .models import AgentToolServer, ToolServer


def ensure_notes_server(agent, *, notes_dir=None) -> ToolServer:
    """`notes`: this project's own MCP server (toolservers.demo_server) over stdio, its notes in
    var/demo-notes; linked to `agent` with no `require_approval` list. Marked trusted (its annotations
    are this project's own words), so they decide: listing and reading run freely, writing and
    deleting wait for a human."""
    server, _ = ToolServer.objects.update_or_create(
        name="notes",
        defaults={
            "transport": ToolServer.Transport.STDIO,
            "command": sys.executable,
            "args": ["-m", "toolservers.demo_server"],
            "env": {"NOTES_DIR": str(notes_dir or settings.VAR_DIR / "demo-notes"), "PYTHONPATH": str(settings.BASE_DIR)},
            "enabled": True,
            "trusted": True,
        },
    )
    AgentToolServer.objects.update_or_create(agent=agent, server=server, defaults={"tools": [], "require_approval": None})
    return server


GIT_WRITES = ["git_commit", "git_reset", "git_create_branch", "git_checkout"]
REPOSITORY_SENTENCE = re.compile(r" ?The git repository is at \S+\.")


def ensure_git_server(agent, *, repository: Path | None = None) -> ToolServer:
    """`git`: the reference `mcp-server-git` (nobody here wrote it) on a demo repository, with an
    explicit list of what needs a human: commits, resets, new branches and checkouts; reading and
    staging run freely. The agent's system prompt says where the repository is, as a model needs."""
    repository = repository or settings.VAR_DIR / "demo-repo"
    ensure_demo_repository(repository)
    server, _ = ToolServer.objects.update_or_create(
        name="git",
        defaults={
            "transport": ToolServer.Transport.STDIO,
            "command": settings.HITL_GIT_MCP_COMMAND,
            "args": ["--repository", str(repository)],
            "env": {},
            "enabled": True,
        },
    )
    AgentToolServer.objects.update_or_create(
        agent=agent, server=server, defaults={"tools": [], "require_approval": GIT_WRITES, "risks": {"git_reset": "high"}}
    )
    prompt = REPOSITORY_SENTENCE.sub("", agent.system_prompt)
    agent.system_prompt = f"{prompt} The git repository is at {repository}."
    agent.save(update_fields=["system_prompt"])
    return server


def ensure_demo_repository(path: Path) -> None:
    """A repository with one commit and one uncommitted change, made once."""
    if (path / ".git").exists():
        return
    path.mkdir(parents=True, exist_ok=True)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.name", "hitl demo")
    git("config", "user.email", "demo@example.com")
    (path / "README.md").write_text("A demo repository for the git tool server.\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "First commit")
    (path / "README.md").write_text("A demo repository for the git tool server.\nAn uncommitted line.\n")
