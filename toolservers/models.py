"""MCP tool servers (managed in the admin only: a stdio server is a command this host runs) and the
agents that use them, with which tools they expose and which need a human."""
import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,29}$")  # no "__": it separates server and tool
RISKS = [(risk, risk) for risk in ("low", "medium", "high", "critical")]


def validate_server_name(name: str) -> None:
    if not SERVER_NAME.match(name or "") or name.endswith("_"):
        raise ValidationError(
            "Letters, digits, - and single _ only, at most 30 characters: the model sees its tools as <server>__<tool>."
        )


class ToolServer(models.Model):
    """An MCP server: a command run over stdio, or a streamable HTTP URL. Its tools are listed from
    the server and cached here (`tools`), refreshed from the admin or `manage.py refresh_tool_servers`."""

    class Transport(models.TextChoices):
        STDIO = "stdio"
        HTTP = "http", "streamable HTTP"

    name = models.CharField(max_length=30, unique=True, validators=[validate_server_name])
    transport = models.CharField(max_length=8, choices=Transport.choices, default=Transport.STDIO)
    command = models.CharField(max_length=500, blank=True, help_text="stdio: the program to run.")
    args = models.JSONField(default=list, blank=True, help_text='stdio: its arguments, a JSON list of strings.')
    env = models.JSONField(
        default=dict, blank=True, help_text="stdio: extra environment variables, a JSON object (PATH and HOME are passed on)."
    )
    url = models.URLField(max_length=500, blank=True, help_text="streamable HTTP: the endpoint, e.g. http://127.0.0.1:9000/mcp.")
    headers = models.JSONField(
        default=dict, blank=True, help_text='streamable HTTP: headers sent with each request, e.g. {"Authorization": "Bearer …"}.'
    )
    timeout_seconds = models.PositiveIntegerField(default=30, help_text="How long one listing or call may take.")
    enabled = models.BooleanField(default=True)
    trusted = models.BooleanField(
        default=False,
        help_text="Believe the server's annotations: with no require_approval list, a tool it marks read-only runs "
        "without a human. Untrusted (the default), its hints are shown but relax nothing: every tool asks.",
    )
    tools = models.JSONField(
        default=list, blank=True, editable=False,
        help_text="The tools as last listed: [{name, description, input_schema, annotations}].",
    )
    refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    refresh_error = models.TextField(blank=True, editable=False)
    # Its trust and its use, with who and when (approvals.policy.versions); not its secrets nor its cached listing.
    history = HistoricalRecords(excluded_fields=["env", "headers", "tools", "refreshed_at", "refresh_error"])

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.transport == self.Transport.STDIO and not self.command:
            raise ValidationError({"command": "A stdio server needs a command."})
        if self.transport == self.Transport.HTTP and not self.url:
            raise ValidationError({"url": "A streamable HTTP server needs a URL."})
        if not (isinstance(self.args, list) and all(isinstance(a, str) for a in self.args)):
            raise ValidationError({"args": "A JSON list of strings."})
        for field in ("env", "headers"):
            value = getattr(self, field)
            if not (isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
                raise ValidationError({field: "A JSON object of strings."})

    def tool(self, name: str) -> dict | None:
        return next((tool for tool in self.tools if tool.get("name") == name), None)


class ToolPin(models.Model):
    """One tool of a server as an admin approved it: its definition (description, input schema,
    annotations) and that definition's hash. A listed tool whose definition hashes otherwise is
    disabled until an admin accepts it (toolservers.pins). `approved_by` empty with `approved_at`
    set: pinned at the server's first listing; `definition` empty: new since, never approved."""

    server = models.ForeignKey(ToolServer, on_delete=models.CASCADE, related_name="pins")
    name = models.CharField(max_length=200)
    definition = models.JSONField(null=True, blank=True, editable=False)
    definition_hash = models.CharField(max_length=64, blank=True, editable=False)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    approved_at = models.DateTimeField(null=True, blank=True, editable=False)
    history = HistoricalRecords()

    class Meta:
        verbose_name = "tool definition"
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="toolservers_toolpin_one_per_tool")]

    def __str__(self) -> str:
        return f"{self.server} → {self.name}"


class AgentToolServer(models.Model):
    """An agent's use of a tool server (kagent's shape): `tools` it exposes (empty: all), and
    `require_approval`, the tools that need a human. Without a `require_approval` list a trusted
    server's annotations decide (a tool marked read-only runs freely, every other one needs a
    human); an untrusted server's tools all need a human."""

    agent = models.ForeignKey("chat.Agent", on_delete=models.CASCADE, related_name="tool_servers")
    server = models.ForeignKey(ToolServer, on_delete=models.CASCADE, related_name="agents")
    tools = models.JSONField(default=list, blank=True, help_text="The server's tools this agent may call; empty: all of them.")
    require_approval = models.JSONField(
        null=True, blank=True,
        help_text="Tools that need a human, each also exposed; empty (null): a trusted server's annotations decide "
        "(read-only runs freely, anything else asks); an untrusted server's tools all ask.",
    )
    risks = models.JSONField(default=dict, blank=True, help_text='Optional risk per tool, e.g. {"git_reset": "high"}.')
    history = HistoricalRecords()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["agent", "server"], name="toolservers_one_link_per_agent")]

    def __str__(self) -> str:
        return f"{self.agent} uses {self.server}"

    def clean(self) -> None:
        for field in ("tools", "require_approval"):
            value = getattr(self, field)
            if value is not None and not (isinstance(value, list) and all(isinstance(name, str) for name in value)):
                raise ValidationError({field: "A JSON list of tool names."})
        known = {tool["name"] for tool in self.server.tools} if self.server_id and self.server.tools else None
        exposed = set(self.tools) or known
        if known is not None and (unknown := sorted(set(self.tools) - known)):
            raise ValidationError({"tools": f"The server has no tool named {', '.join(unknown)}."})
        if self.require_approval and exposed is not None and (hidden := sorted(set(self.require_approval) - exposed)):
            raise ValidationError(
                {"require_approval": f"Each tool that needs approval must also be exposed: {', '.join(hidden)} is not."}
            )
        if not isinstance(self.risks, dict) or any(risk not in dict(RISKS) for risk in self.risks.values()):
            raise ValidationError({"risks": "A JSON object of tool name to low, medium, high or critical."})

    def exposes(self, tool_name: str) -> bool:
        return not self.tools or tool_name in self.tools
