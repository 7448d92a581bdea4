"""Agents, conversations, their messages and tool calls, API tokens, and the demo outbox."""
import hashlib
import secrets
import uuid
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from approvals.deciders import routing
from approvals.policy import timeouts

LAST_USED_PRECISION = timedelta(minutes=1)


# Choices live at module level so that each model's Meta can name them in its constraints.
class ConversationStatus(models.TextChoices):
    IDLE = "idle"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    FAILED = "failed"


class MessageRole(models.TextChoices):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class ToolCallStatus(models.TextChoices):
    PENDING_APPROVAL = "pending_approval"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    WAITING_FOR_INPUT = "waiting_for_input"  # ran, and its tool asked a human for input (`input_requests`)
    LAPSED = "lapsed"  # approved, but not started within the agent's approval_valid_seconds: not run


class Agent(models.Model):
    """What a conversation talks to: a model, a system prompt, tools and which of them need a human."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=100)
    system_prompt = models.TextField(blank=True)
    model = models.CharField(max_length=200, default="scripted/demo", help_text="A litellm model string.")
    api_base = models.CharField(max_length=300, blank=True, help_text="Optional provider URL (a local server).")
    tools = models.JSONField(default=list, blank=True, help_text="Names of the tools this agent may call.")
    require_approval = models.JSONField(
        default=list, blank=True, help_text="Tool names that always need a human's approval."
    )
    all_tools_need_approval = models.BooleanField(default=False)
    max_steps = models.PositiveIntegerField(default=10, help_text="Model calls per user message at most.")
    fetch_allowlist = models.JSONField(
        default=list, blank=True, help_text="Domains web_fetch may read without approval."
    )
    allow_private_fetch = models.BooleanField(
        default=False, help_text="Let web_fetch reach private and loopback addresses."
    )
    owner_max_risk = models.CharField(
        max_length=16,
        choices=[(r, r) for r in ("low", "medium", "high", "critical")],
        default="critical",
        help_text="The riskiest call a conversation's owner may approve; riskier ones need an approver "
        "who is not the owner (four eyes).",
    )
    max_auto_approve_risk = models.CharField(
        max_length=16,
        choices=[(r, r) for r in ("low", "medium", "high")],
        default="medium",
        help_text="The riskiest call an allow rule may approve without a human (critical never).",
    )
    trust_after = models.PositiveSmallIntegerField(
        default=3,
        help_text="After this many approvals of alike calls by the same user, and no rejection since, the next "
        "card suggests an allow rule (never made automatically). 0: never suggest.",
    )
    approval_timeout_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pending approvals expire after this long (empty: never)."
    )
    timeout_action = models.CharField(
        max_length=8, choices=timeouts.CHOICES, default=timeouts.EXPIRE,
        help_text="What a pending call's deadline does when no one decided in time: expire it (nothing runs), reject it "
        "(the model reads why) or approve it (low-risk calls any one person could approve, only; others expire).",
    )
    timeout_actions = models.JSONField(
        default=dict, blank=True,
        help_text='Per tool, instead of the above: {"run_command": "reject", "get_weather": "approve"}.',
    )
    approval_valid_seconds = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="An approved call that has not started within this long after its approval is not run: it lapses "
        "(workers down, a queue backed up), and the model is told so (empty: an approval never lapses).",
    )
    always_ask = models.JSONField(
        default=dict, blank=True,
        help_text='Patterns that always need a human, per tool: {"run_command": ["rm -rf *", "sudo *", "curl * | sh"]} '
        "(matched against every string argument; an ask rule of the agent's own).",
    )
    step_up_from_risk = models.CharField(
        max_length=16, blank=True, choices=[("", "never"), ("high", "high"), ("critical", "critical")], default="",
        help_text="From this risk up, approving needs the approver's passkey on the site (step-up); other surfaces may only reject.",
    )
    reviewer_model = models.CharField(
        max_length=200, blank=True,
        help_text="An AI reviewer that looks at a gated call before a person does (a litellm model string; scripted/reviewer "
        "offline): it approves, or asks a person with why. Never a call a rule, four eyes, a route, step-up or a critical "
        "confirmation sends to a person. Empty: off.",
    )
    reviewer_api_base = models.CharField(max_length=300, blank=True, help_text="Optional provider URL of the reviewer's model.")
    reviewer_max_risk = models.CharField(
        max_length=8, choices=[("low", "low"), ("medium", "medium")], default="low",
        help_text="The riskiest call the reviewer may approve (medium at most); riskier ones go to a person.",
    )
    # Who may use it: an agent is a security boundary (its tools, allowlists, private fetch).
    open_to_everyone = models.BooleanField(
        default=False, help_text="Every signed-in user may use it. Otherwise only the users and groups below."
    )
    allowed_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="usable_agents")
    allowed_groups = models.ManyToManyField("auth.Group", blank=True, related_name="usable_agents")
    # Every change, with who and when (the admin's History); approvals.policy.versions numbers the policy's.
    history = HistoricalRecords(m2m_fields=["allowed_users", "allowed_groups"])

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = timeouts.settings_errors(
            timeout_action=self.timeout_action, timeout_actions=self.timeout_actions, tool_risks=self.tool_risks()
        )
        if errors:
            raise ValidationError(errors)

    def tool_risks(self) -> dict[str, str]:
        """The declared risk of each tool it may call (a tool server's, once it is saved)."""
        from .tools import registry  # lazily: the tool sources (tool servers) import these models

        specs = registry.for_agent(self) if self.pk else [registry.get(name) for name in self.tools if registry.get(name)]
        return {spec.name: spec.risk for spec in specs}


class ConversationSource(models.TextChoices):
    """Who asks for the calls: the app's own loop (chat), an outside agent through the API, or an MCP
    client through the gateway. Outside conversations hold calls only: the loop never advances them."""

    CHAT = "chat"
    API = "api", "API"
    MCP = "mcp", "MCP"


class Conversation(models.Model):
    Status = ConversationStatus
    Source = ConversationSource

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="conversations")
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CHAT)
    external_thread = models.CharField(
        max_length=200, blank=True, help_text="An outside conversation's thread: the caller's thread id, or the MCP session's."
    )
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.IDLE)
    error = models.TextField(blank=True, help_text="Why the last run failed, in words a user can read.")
    relay_to = models.CharField(
        max_length=16, blank=True,
        help_text="The chat its owner last wrote from, where the agent's answers go too (telegram, slack; chat.elsewhere).",
    )
    # The lease: which task is advancing this conversation, and until when it may (see chat.loop).
    advancing_token = models.CharField(max_length=64, blank=True)
    advancing_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ConversationStatus.values), name="chat_conversation_status_valid"),
            # One conversation per outside thread of a caller: requests of one thread land together.
            models.UniqueConstraint(
                fields=["owner", "agent", "source", "external_thread"], condition=~Q(external_thread=""),
                name="chat_conversation_one_per_thread",
            ),
        ]
        indexes = [
            models.Index(
                fields=["updated_at"],
                condition=Q(status__in=["running", "waiting_for_approval"]),
                name="chat_conv_active_by_updated",
            ),
            models.Index(fields=["owner", "-created_at"], name="chat_conv_owner_created"),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)

    @property
    def is_outside(self) -> bool:
        """Its calls come from an outside agent or an MCP client: nobody chats in it, no model runs."""
        return self.source != ConversationSource.CHAT

    @property
    def uses_scripted_model(self) -> bool:
        return self.agent.model.startswith("scripted/")


class Message(models.Model):
    Role = MessageRole

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # False for what the model must not see as conversation: a typed "yes" that decided approvals
    # (the tool results carry the decision) and the app's own notices (role system).
    in_model_context = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.CheckConstraint(condition=Q(role__in=MessageRole.values), name="chat_message_role_valid"),
            models.UniqueConstraint(fields=["conversation", "position"], name="chat_message_unique_position"),
        ]
        indexes = [
            # The per-user message quota counts a user's messages of the last minute (chat.quotas).
            models.Index(fields=["author", "created_at"], name="chat_msg_author_created"),
        ]

    def __str__(self) -> str:
        return f"{self.role} #{self.position}"

    @property
    def approve_all_shown(self) -> list[str]:
        """Pending approvals of this turn that the owner may decide, as "<id>:<version shown>": what
        "Approve all" covers, and so sends (approvals.services.decide_all decides only those versions).
        (Uses prefetched tool calls and approvals; four-eyes calls are left to an approver, critical
        ones are approved one at a time, with their typed confirmation, and questions and plans are
        answered on their cards.)"""
        return [
            f"{c.approval.pk}:{c.approval.shown_hash}"
            for c in self.tool_calls.all()
            if c.status == ToolCallStatus.PENDING_APPROVAL
            and c.approval.kind == "action"  # a question or a plan is answered on its own card
            and not c.approval.approver_required
            and not c.approval.confirmation_required
        ]


class ToolCall(models.Model):
    Status = ToolCallStatus

    # Statuses after which the call has its one tool result for the model.
    FINISHED = (
        Status.REJECTED, Status.EXPIRED, Status.SUCCEEDED, Status.FAILED, Status.INTERRUPTED, Status.CANCELLED, Status.LAPSED,
    )

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="tool_calls")
    position = models.PositiveIntegerField(default=0)
    call_id = models.CharField(max_length=200, help_text="The model's id for this call.")
    name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    raw_arguments = models.TextField(blank=True, help_text="The arguments exactly as the model sent them.")
    arguments_hash = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=32, choices=Status.choices)
    is_gated = models.BooleanField(default=False)
    result = models.TextField(blank=True)
    error = models.TextField(blank=True)
    # A tool may ask a human for input mid-call (an MCP input request): the question is a call of its
    # own in the same turn, `asked_by` this one (never shown to the model), and what the tool needs to
    # go on once answered is kept here.
    asked_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="input_requests",
        help_text="The call whose tool asked this question (an input request); empty for the model's own calls.",
    )
    input_state = models.JSONField(null=True, blank=True, help_text="What the tool needs to go on once its question is answered.")
    # Undo (chat.undo): what a succeeded call of a reversible tool changed, kept to put back until
    # undo_until; an undo is a call of its own (`undo_of`), gated and run like any call.
    undo_state = models.JSONField(null=True, blank=True, help_text="What the call changed, kept to undo it, and a fingerprint of what it left.")
    undo_until = models.DateTimeField(null=True, blank=True, help_text="Until when the call may be undone (if what it left is still there).")
    undo_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="undos", help_text="The call this one undoes."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["message_id", "position"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ToolCallStatus.values), name="chat_toolcall_status_valid"),
            models.UniqueConstraint(fields=["message", "call_id"], name="chat_toolcall_unique_call_id"),
        ]

    def __str__(self) -> str:
        return f"{self.name}({self.call_id})"


class ApiToken(models.Model):
    """A bearer token for the JSON API, A2A, AG-UI and the MCP gateway; only its SHA-256 is stored,
    so the database never leaks it. Its scope is the power it was made for: a person's token
    decides; a program's (an MCP client, an outside agent, an A2A client) asks and reads outcomes,
    and never decides what it asked, nor anything else."""

    class Scope(models.TextChoices):
        DECIDE = routing.DECIDING_SCOPE, "decide: ask, read and decide, as its user"
        ASK = routing.ASKING_SCOPE, "ask: ask and read outcomes, never decide"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.DECIDE)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, user, *, scope: str = Scope.DECIDE) -> str:
        key = "hitl_" + secrets.token_urlsafe(32)
        cls.objects.create(user=user, key_hash=cls.hash_key(key), scope=scope)
        return key

    @classmethod
    def user_for(cls, key: str):
        """The active user whose token `key` is (noting the use), or None: every surface a program
        uses asks here. The user carries the token's scope (`token_scope`), which
        approvals.deciders.routing reads before it lets anyone decide."""
        try:
            token = cls.objects.select_related("user").get(key_hash=cls.hash_key(key))  # unique: no ORDER BY
        except cls.DoesNotExist:
            return None
        if not token.user.is_active:
            return None
        token.note_use()
        token.user.token_scope = token.scope
        return token.user

    def note_use(self) -> None:
        """Record that the token was used, to the minute: a write on every request would queue all
        API calls on SQLite's one write lock."""
        now = timezone.now()
        if self.last_used_at is None or now - self.last_used_at >= LAST_USED_PRECISION:
            ApiToken.objects.filter(pk=self.pk).update(last_used_at=now)
            self.last_used_at = now

    def __str__(self) -> str:
        return f"token of {self.user}"


class OutboxEmail(models.Model):
    """Mail the send_email demo tool 'sent': stored, never delivered."""

    conversation = models.ForeignKey(Conversation, on_delete=models.PROTECT, related_name="outbox")
    to = models.CharField(max_length=254)
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    idempotency_key = models.CharField(max_length=100, unique=True)
    sent_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"to {self.to}: {self.subject}"
