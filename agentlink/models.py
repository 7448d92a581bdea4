import re
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from chat.models import Agent, Conversation
from toolservers.models import ToolServer

REMOTE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,29}$")  # no "__": it separates the name and the tool
REMOTE_SEPARATOR = "__"
ASK = "ask"
# In an A2A message's metadata: how many hitl agents asked in a row before it (Task.hops).
HOPS_KEY = "hitl_hops"


def validate_remote_name(name: str) -> None:
    if not REMOTE_NAME.match(name or "") or name.endswith("_"):
        raise ValidationError("Letters, digits, - and single _ only, at most 30 characters: the model calls it <name>__ask.")


class Task(models.Model):
    """A run of an agent started over A2A: one turn of a conversation, which is the A2A context.

    Its state is read from the conversation (`agentlink.runs`), never stored, except once the next
    turn of the conversation has begun (over A2A or in the chat): then this one is over,
    `final_state` says how it ended, `end_position` where its turn ended and `status_at` when its
    status last changed (until then its status time is the conversation's `updated_at`). `shown` is
    what the client was last sent of a pause, so that a reply to it decides only that."""

    class FinalState(models.TextChoices):
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELED = "canceled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="a2a_tasks")
    position = models.PositiveIntegerField(help_text="The position of the user message that started this turn.")
    canceled = models.BooleanField(default=False, help_text="Cancelled over A2A (the Stop).")
    final_state = models.CharField(max_length=16, choices=FinalState.choices, blank=True)
    end_position = models.PositiveIntegerField(null=True, blank=True, help_text="The first message of the next turn.")
    shown = models.JSONField(
        default=dict, blank=True,
        help_text="{client: {approval id: shown_hash}}: for each client (its token, hashed), the calls the last input-required "
        "status sent to it for this task listed; its blanket decision_type decides these, at these versions, and nothing pending since.",
    )
    hops = models.PositiveSmallIntegerField(
        default=0,
        help_text="How many hitl agents asked in a row to start it: 0 when a person's client did, one more than the asking "
        "task's when an agent's remote tool did (the message's metadata hitl_hops). Past HITL_A2A_MAX_HOPS it is refused.",
    )
    status_at = models.DateTimeField(
        null=True, blank=True,
        help_text="Once over: when its status last changed (the conversation's updated_at as the next turn found it), "
        "its A2A status timestamp from then on, as the conversation moves on without it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "position"], name="agentlink_task_one_per_turn"),
        ]

    def __str__(self) -> str:
        return str(self.id)

    @staticmethod
    def hops_before(conversation_id) -> int:
        """The hops of the conversation's latest A2A task (0 if it has none): a remote agent asked
        from this conversation is told one more."""
        latest = Task.objects.filter(conversation_id=conversation_id).order_by("-position").values_list("hops", flat=True)
        return latest.first() or 0


class PushConfig(models.Model):
    """Where an A2A client wants a task's state changes POSTed (a push notification config, A2A §9.5):
    the client's URL and the token it will check, set by the client that owns the task and sent only
    to a URL the operator allows (agentlink.push)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="push_configs")
    config_id = models.CharField(max_length=200, help_text="The client's id for this config (the task id when it gave none).")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", help_text="The token's user who set it.")
    url = models.URLField(max_length=2000)
    token = models.CharField(max_length=500, blank=True, help_text="Sent back in X-A2A-Notification-Token, for the client to check.")
    authentication = models.JSONField(default=dict, blank=True, help_text="The client's authentication info (scheme, credentials).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["task", "config_id"], name="agentlink_pushconfig_one_per_id"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}/{self.config_id}"


class RemoteAgent(models.Model):
    """Another A2A agent, called as a tool (`<name>__ask`) by the agents linked to it (agentlink.remote):
    its card URL, the bearer token our calls carry, how long one call may take. Its calls that
    wait for a human there are decided here, as cards "via <name>", by our policy and our people.
    Managed in the admin only: the token is stored (so the worker can send it) and shown masked.

    An agent is linked to it as to any tool, by `<name>__ask` in its `tools` (the admin's form here
    sets them): a policy change, versioned with the agent, and one the loop reads with the agent's
    row (an agent with no remote agents costs its steps no query)."""

    name = models.CharField(
        max_length=30, unique=True, validators=[validate_remote_name],
        help_text="Letters, digits, - and single _: the model calls it <name>__ask, and its calls read <name>__<tool>.",
    )
    card_url = models.URLField(
        max_length=500, help_text="Its agent card, e.g. https://other.example/a2a/docs/.well-known/agent-card.json.",
    )
    token = models.CharField(max_length=500, blank=True, help_text="Sent as Authorization: Bearer … to the card and the agent.")
    timeout_seconds = models.PositiveIntegerField(default=60, help_text="How long one call may wait for the remote to answer or pause.")
    enabled = models.BooleanField(default=True)
    card = models.JSONField(default=dict, blank=True, editable=False, help_text="Its agent card as last read.")
    refreshed_at = models.DateTimeField(null=True, blank=True, editable=False)
    refresh_error = models.TextField(blank=True, editable=False)

    class Meta:
        verbose_name = "remote A2A agent"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        # A tool server of that name would share its tools' prefix.
        if ToolServer.objects.filter(name__iexact=self.name).exists():
            raise ValidationError({"name": f"A tool server is named {self.name}: its tools are {self.name}__<tool> already."})
        if self.timeout_seconds is not None and not 1 <= self.timeout_seconds <= 3600:
            raise ValidationError({"timeout_seconds": "From 1 to 3600 seconds."})

    @property
    def tool_name(self) -> str:
        return tool_name(self.name)

    def linked_agents(self) -> list:
        return [agent for agent in Agent.objects.order_by("slug") if self.tool_name in (agent.tools or [])]


def tool_name(remote_name: str) -> str:
    """The tool an agent calls a remote agent by: `<name>__ask`."""
    return f"{remote_name}{REMOTE_SEPARATOR}{ASK}"
