"""Approval: the stored human decision about one gated tool call. Once decided it never changes."""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords


class Risk(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"  # an action, or a plan with the steps in `answer`
    REJECTED = "rejected"  # an action, or a whole plan
    ANSWERED = "answered"  # a question, with its `answer`
    DECLINED = "declined"  # a question the human chose not to answer (why: `rejection_reason`)
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class PauseKind(models.TextChoices):
    """What the agent waits for: leave to act (a gated tool call), an answer, or a plan's go-ahead."""

    ACTION = "action"
    QUESTION = "question"
    PLAN = "plan"


class DecidedVia(models.TextChoices):
    CHAT = "chat"
    DASHBOARD = "dashboard"
    API = "api"
    TEXT = "text"
    TIMEOUT = "timeout"
    RULE = "rule"  # decided at once by an allow or deny rule (`Approval.rule`), by nobody
    REPEAT = "repeat"  # rejected at once: the same call was just rejected in the conversation (`repeat_of`)
    A2A = "a2a"  # by an A2A client, acting as its token's user (agentlink)
    TELEGRAM = "telegram"  # by a press or a reply in Telegram, as the linked user who sent it (telegramlink)
    SLACK = "slack"  # by a press in Slack, as the linked user who pressed (slacklink)
    EMAIL = "email"  # through a one-click email link, as its recipient (emaillink, approvals.tokens)
    PUSH = "push"  # by a notification's action, as the subscribed user (pushlink, approvals.tokens)
    POLICY = "policy"  # approved at once: a call from outside (chat.outside) that the agent's policy does not gate
    AGUI = "agui", "AG-UI"  # by an AG-UI client resuming an interrupt, as its token's or session's user (aguilink)
    REVIEWER = "reviewer"  # approved by the agent's AI reviewer (approvals.reviewer), by nobody: `reviewer_model`, `reviewer_rationale`


class Approval(models.Model):
    """One pause of the agent for a human: a gated tool call (`action`), a question or a plan."""

    Status = ApprovalStatus
    Via = DecidedVia
    Kind = PauseKind

    tool_call = models.OneToOneField("chat.ToolCall", on_delete=models.PROTECT, related_name="approval")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.PROTECT, related_name="approvals")
    rule = models.ForeignKey(
        "approvals.Rule", null=True, blank=True, on_delete=models.PROTECT, related_name="decisions",
        help_text="The rule that decided it at once (decided via rule, by nobody); empty for a human's decision.",
    )
    # CASCADE: a repeat means nothing without the rejection it repeats. Decided approvals are never
    # deleted but when a whole database is erased (approvals.audit.triggers.erasing), and then all go.
    repeat_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="repeats",
        help_text="The earlier rejection of the same call this one repeats (decided via repeat).",
    )
    rule_suggestion = models.JSONField(
        null=True, blank=True,
        help_text='What the card offers to remember: {"arguments": conditions prefilled from the call, "may_allow": '
        'whether an allow rule could ever approve such a call, "trusted": the approvals that make it a trust suggestion}.',
    )
    annotations = models.JSONField(
        null=True, blank=True,
        help_text="What the tool's server says of it (MCP annotations, as given): hints it may get wrong, never a guarantee.",
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", help_text="The conversation's owner."
    )
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ACTION)
    question = models.JSONField(
        null=True, blank=True,
        help_text='A question\'s {"text", "type", "options", "min", "max", "default", "required"} (approvals.pauses.questions).',
    )
    plan = models.JSONField(
        null=True, blank=True, help_text='A plan\'s {"title", "steps": [{"index", "action", "description", "optional"}]}.'
    )
    answer = models.JSONField(
        null=True, blank=True,
        help_text='A question\'s answer, or an approved plan\'s {"approved_steps", "dropped_steps"}; empty otherwise.',
    )
    reason = models.TextField(help_text="Why the policy asked for approval.")
    risk = models.CharField(max_length=16, choices=Risk.choices, default=Risk.MEDIUM)
    arguments_hash = models.CharField(max_length=64, help_text="Hash of the arguments shown, and so approved.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    requested_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_via = models.CharField(max_length=16, choices=Via.choices, blank=True)
    rejection_reason = models.TextField(blank=True)
    comment = models.TextField(
        blank=True, help_text="The decider's optional word on the decision, kept and chained with it (approvals.audit)."
    )
    remembered = models.BooleanField(
        default=False, help_text="Decided with a rule saved beside it (\"Always\"): the rule's made_from, which its card offers to undo."
    )
    responded = models.TextField(
        blank=True,
        help_text="Words sent to the agent instead of a decision (\"use staging, not prod\"): the call is rejected and the model reads them.",
    )
    approver_required = models.BooleanField(
        default=False, help_text="Only an approver who is not the requester may decide (four eyes)."
    )
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Expired by the system if still pending.")
    timeout_action = models.CharField(
        max_length=8, default="expire", choices=[("expire", "expire"), ("reject", "reject"), ("approve", "approve")],
        help_text="What its deadline does if no one decided: set when requested from its agent's settings "
        "(approvals.policy.timeouts); an approve it may not do was stored as expire, the explanation says why.",
    )
    preview = models.JSONField(
        null=True, blank=True, help_text='What the call will do, as shown: {"kind": ..., "text": ...}; empty: the tool has none.'
    )
    preview_state = models.CharField(
        max_length=100, blank=True,
        help_text="Fingerprint of the state the preview describes; a run whose state differs is refused.",
    )
    confirmation_hint = models.CharField(
        max_length=200, blank=True, help_text="What a human types to approve a critical call."
    )
    # The AI reviewer (approvals.reviewer): a call it may decide waits for it first (`reviewing`, until
    # `review_until`); it approves (decided via reviewer) or hands the call to a person (`escalated`).
    review_state = models.CharField(
        max_length=16, blank=True, choices=[("", "not reviewed"), ("reviewing", "reviewing"), ("escalated", "escalated"), ("decided", "decided")],
        help_text="Where the AI reviewer is with it: reviewing (a person may still decide first), escalated to a person, or decided.",
    )
    review_until = models.DateTimeField(null=True, blank=True, help_text="While reviewing: when the reviewer is late and a person is asked.")
    reviewer_model = models.CharField(max_length=200, blank=True, help_text="The reviewer's model (a litellm model string).")
    reviewer_rationale = models.TextField(blank=True, help_text="Why the reviewer approved it, or asked a person.")
    # A claim ("I'm on it"): a signal to the other approvers, not a lock. Anyone who may decide may
    # claim (replacing an earlier claim) or unclaim; the deciding update clears it (approvals.services).
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who said they are on it, while pending; empty once decided.",
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Routing (approvals.deciders.routing): which route decides who may approve it, how many must, and when
    # the route's approvers are reminded and its escalation groups let in. Set once, when requested.
    route = models.ForeignKey(
        "approvals.Route", null=True, blank=True, on_delete=models.PROTECT, related_name="approvals",
        help_text="The route that chose its approvers; empty: the owner or any global approver, as before routes.",
    )
    quorum = models.PositiveSmallIntegerField(default=1, help_text="How many distinct eligible people must approve.")
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Whose decision `decided_by` made, through a delegation; empty: their own.",
    )
    remind_at = models.DateTimeField(null=True, blank=True, help_text="When its approvers are told again, if still pending.")
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True, help_text="When the escalation groups may decide too, if still pending.")
    escalated_at = models.DateTimeField(null=True, blank=True)
    explanation = models.JSONField(
        null=True, blank=True,
        help_text='How it came to be asked or decided at once: [{"step", "outcome", "detail"}], in the order applied (approvals.policy.explain).',
    )
    policy_version = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The number of the policy version (approvals.PolicyVersion) in force when it was requested; empty: before versions.",
    )
    step_up_assertion = models.CharField(
        max_length=200, blank=True,
        help_text="The passkey assertion (its credential id) that proved the approver was present, for a call that needs step-up.",
    )
    trace_context = models.JSONField(
        default=dict, blank=True,
        help_text="The W3C trace context (traceparent, tracestate) of the step that asked, so that its wait and decision join "
        "that trace (core.telemetry); empty when tracing is off.",
    )
    # Expiry that warns, extends and asks again (approvals.services.extend, ask_again, warn_expiring).
    warn_at = models.DateTimeField(
        null=True, blank=True, help_text="When its channels and its conversation are warned that it expires soon, if still pending."
    )
    warned_at = models.DateTimeField(null=True, blank=True)
    extended_at = models.DateTimeField(null=True, blank=True, help_text="When its deadline was extended (once at most).")
    extended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    asked_again_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="asked_again",
        help_text="The expired approval this one asks again, for the same call and version.",
    )
    # An edit made before the approval: the arguments that will run instead of the requested ones.
    edited_arguments = models.JSONField(null=True, blank=True)
    edited_arguments_hash = models.CharField(max_length=64, blank=True)
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    edited_at = models.DateTimeField(null=True, blank=True)
    # The audit chain (approvals.audit), written by the same UPDATE that decides the approval.
    chain_position = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="This decision's place in the audit chain, from 1; empty while pending."
    )
    previous_hash = models.CharField(
        max_length=64, blank=True, help_text="The decision hash of the decision before this one in the chain."
    )
    decision_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 over this decision's content and the previous hash."
    )

    class Meta:
        ordering = ["requested_at", "id"]
        permissions = [("decide_approval", "Can decide other users' approvals")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ApprovalStatus.values), name="approvals_approval_status_valid"),
            models.CheckConstraint(condition=Q(risk__in=Risk.values), name="approvals_approval_risk_valid"),
            models.CheckConstraint(condition=Q(kind__in=PauseKind.values), name="approvals_approval_kind_valid"),
            models.CheckConstraint(
                condition=Q(status="pending", decided_at__isnull=True)
                | (~Q(status="pending") & Q(decided_at__isnull=False)),
                name="approvals_approval_decided_at_iff_decided",
            ),
            # One decision per link: should two deciders ever both extend the same head, one fails
            # here rather than forking the chain. Also the index that finds the newest link.
            models.UniqueConstraint(
                fields=["chain_position"], condition=Q(chain_position__isnull=False),
                name="approvals_approval_unique_chain_position",
            ),
        ]
        indexes = [
            # Oldest first, for the dashboard. `status` leads although the condition fixes it: SQLite
            # then takes `status = 'pending'` as an index constraint, and never prefers walking every
            # approval in `approvals_requested_order` (which, with statistics, it did).
            models.Index(
                fields=["status", "requested_at", "id"], condition=Q(status="pending"), name="approvals_pending_by_age"
            ),
            models.Index(fields=["expires_at"], condition=Q(status="pending"), name="approvals_pending_by_expiry"),
            models.Index(fields=["-decided_at"], condition=~Q(status="pending"), name="approvals_decided_by_time"),
            models.Index(fields=["conversation", "status"], name="approvals_conv_status"),
            # The API lists approvals oldest first, with or without a status filter: all of them for
            # an approver, the caller's own for anyone else.
            models.Index(fields=["requested_at", "id"], name="approvals_requested_order"),
            models.Index(fields=["requested_by", "requested_at", "id"], name="approvals_requester_order"),
            models.Index(fields=["kind", "status", "requested_at", "id"], name="approvals_kind_status_order"),
            models.Index(fields=["remind_at"], condition=Q(status="pending", reminded_at__isnull=True, remind_at__isnull=False), name="approvals_due_reminders"),
            models.Index(fields=["escalate_at"], condition=Q(status="pending", escalated_at__isnull=True, escalate_at__isnull=False), name="approvals_due_escalations"),
            models.Index(fields=["warn_at"], condition=Q(status="pending", warned_at__isnull=True, warn_at__isnull=False), name="approvals_due_warnings"),
        ]

    def __str__(self) -> str:
        return f"approval #{self.pk} ({self.status})"

    @property
    def is_edited(self) -> bool:
        return self.edited_arguments is not None

    @property
    def shown_hash(self) -> str:
        """The hash of the arguments a decider is shown now, and so approves: the edit's, if any."""
        return self.edited_arguments_hash if self.is_edited else self.arguments_hash

    @property
    def approved_arguments(self) -> dict | None:
        """What was approved, and so runs: the edit, if any, else the requested arguments; None
        until approved. (Reads the tool call: load it with the approval.)"""
        if self.status != ApprovalStatus.APPROVED:
            return None
        return self.edited_arguments if self.is_edited else self.tool_call.arguments

    @property
    def confirmation_required(self) -> bool:
        return self.risk == Risk.CRITICAL


class Route(models.Model):
    """Who decides an agent's gated calls of some tools from some risk up: members of `approvers`
    (Django groups), `quorum` of them, reminded after `remind_after_seconds` and joined by the
    `escalate_to` groups after `escalate_after_seconds`. The most specific matching route applies
    (approvals.deciders.routing.match). Removing a route keeps it (`deleted_at`): what it routed still names it."""

    agent = models.ForeignKey("chat.Agent", on_delete=models.PROTECT, related_name="routes")
    tool = models.CharField(max_length=200, default="*", help_text="A tool name, or a glob such as payments__*.")
    min_risk = models.CharField(max_length=16, choices=Risk.choices, default=Risk.LOW)
    approvers = models.ManyToManyField("auth.Group", related_name="approval_routes")
    quorum = models.PositiveSmallIntegerField(default=1)
    remind_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    escalate_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    escalate_to = models.ManyToManyField("auth.Group", blank=True, related_name="escalation_routes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Removed: it routes nothing new.")
    history = HistoricalRecords(m2m_fields=["approvers", "escalate_to"])

    class Meta:
        ordering = ["agent_id", "tool", "min_risk", "id"]
        permissions = [("manage_route", "Can define who approves which calls (routes)")]
        constraints = [
            models.CheckConstraint(condition=Q(min_risk__in=Risk.values), name="approvals_route_min_risk_valid"),
            models.CheckConstraint(condition=Q(quorum__gte=1), name="approvals_route_quorum_positive"),
        ]

    def __str__(self) -> str:
        return f"route #{self.pk}: {self.tool} from {self.min_risk} risk, quorum {self.quorum}"


class Vote(models.Model):
    """One eligible person's approve toward an approval's quorum, at the version they saw. The
    quorum-th distinct vote approves it. Linked into the audit chain like a decision."""

    approval = models.ForeignKey(Approval, on_delete=models.PROTECT, related_name="votes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", help_text="Who voted.")
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="Whose vote it is, cast through a delegation; empty: the voter's own.",
    )
    voter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+",
        help_text="Whose vote it counts as toward the quorum: on_behalf_of, else user.",
    )
    shown_hash = models.CharField(max_length=64, help_text="The version approved: a vote counts only while the call is unchanged.")
    decided_at = models.DateTimeField(default=timezone.now)
    via = models.CharField(max_length=16, choices=DecidedVia.choices)
    comment = models.TextField(blank=True)
    chain_position = models.PositiveBigIntegerField(unique=True)
    previous_hash = models.CharField(max_length=64)
    decision_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["decided_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["approval", "voter", "shown_hash"], name="approvals_vote_once_per_voter"),
            models.UniqueConstraint(fields=["approval", "user", "shown_hash"], name="approvals_vote_once_per_person"),
        ]

    def __str__(self) -> str:
        return f"vote on approval #{self.approval_id}"


class Outcome(models.Model):
    """What an outside agent says happened when it ran a call approved here (chat.outside): once,
    for the version approved. Linked into the audit chain like a decision; final once reported."""

    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    approval = models.OneToOneField(Approval, on_delete=models.PROTECT, related_name="outcome")
    status = models.CharField(max_length=16, choices=Status.choices)
    result = models.TextField(blank=True, help_text="What the caller says the call returned or why it failed (shortened).")
    shown_hash = models.CharField(max_length=64, help_text="The version the caller ran: the one approved.")
    reported_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reported_at = models.DateTimeField(default=timezone.now)
    chain_position = models.PositiveBigIntegerField(unique=True)
    previous_hash = models.CharField(max_length=64)
    decision_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(status__in=["succeeded", "failed"]), name="approvals_outcome_status_valid")]

    def __str__(self) -> str:
        return f"outcome of approval #{self.approval_id}: {self.status}"


class Delegation(models.Model):
    """`delegator` lets `delegate` decide what the delegator may, from `starts_at` to `ends_at` (or
    until ended early): a holiday's handover. Linked into the audit chain when made and when ended."""

    delegator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="delegations_given")
    delegate = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="delegations_received")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Ended early, at this time.")
    ended_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    chain_position = models.PositiveBigIntegerField(unique=True)
    previous_hash = models.CharField(max_length=64)
    decision_hash = models.CharField(max_length=64)
    end_chain_position = models.PositiveBigIntegerField(null=True, blank=True, unique=True)
    end_previous_hash = models.CharField(max_length=64, blank=True)
    end_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-starts_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(ends_at__gt=models.F("starts_at")), name="approvals_delegation_window"),
            models.CheckConstraint(condition=~Q(delegator=models.F("delegate")), name="approvals_delegation_not_self"),
        ]
        indexes = [models.Index(fields=["delegate", "ends_at"], name="approvals_delegations_to")]

    def __str__(self) -> str:
        return f"delegation #{self.pk}"

    def is_active(self, now=None) -> bool:
        now = now or timezone.now()
        return self.ended_at is None and self.starts_at <= now < self.ends_at


class DecisionToken(models.Model):
    """The proof for one decision outside the site (an email link, a notification's action): who
    may decide which approval, at which version, until when. Single use; the signed string that
    names it is approvals.tokens'. A decision anywhere else makes every token of the approval moot."""

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="decision_tokens")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=16, choices=[(DecidedVia.EMAIL, "email"), (DecidedVia.PUSH, "push")])
    shown_hash = models.CharField(max_length=64, help_text="The version the message showed: only that one is decided.")
    nonce = models.CharField(max_length=32, help_text="Random: the signed token names it, so a guessed id proves nothing.")
    complete = models.BooleanField(
        default=True,
        help_text="Whether the message showed the whole call (every argument and the preview): one that showed it cut can reject, never approve.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["approval", "user"], name="approvals_token_by_approval")]

    def __str__(self) -> str:
        return f"{self.channel} token for approval #{self.approval_id}"


class LateDecision(models.Model):
    """A decision that arrived after its approval had expired: refused (the expiry stands), and kept
    for the audit, so that "they answered, too late" is never read as "nobody answered"."""

    approval = models.ForeignKey(Approval, on_delete=models.PROTECT, related_name="late_decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    via = models.CharField(max_length=16, choices=DecidedVia.choices, blank=True)
    decision = models.CharField(max_length=16, help_text="What they wanted: approve or reject.")
    arrived_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["arrived_at", "id"]

    def __str__(self) -> str:
        return f"{self.user} would {self.decision} approval #{self.approval_id}, after it expired"


class Snooze(models.Model):
    """One approver's "not now" on one pending approval: hidden from that approver's inbox and
    pending count until `until` (the others still see it). It decides nothing."""

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="snoozes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    until = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["approval", "user"], name="approvals_snooze_one_per_approver")]
        indexes = [models.Index(fields=["user", "until"], name="approvals_snooze_by_user")]

    def __str__(self) -> str:
        return f"approval #{self.approval_id} snoozed until {self.until:%H:%M}"


class Rule(models.Model):
    """A saved decision: calls of a tool (a name or a glob) whose arguments match are allowed or
    denied at once, without asking, within a scope. Applied only after the tool's own gate asks for
    a human, and never to what must always be asked (approvals.policy.rules.may_auto_approve). Removing a
    rule keeps it (disabled, `deleted_at`), so the decisions it made still name it."""

    class Effect(models.TextChoices):
        ALLOW = "allow"
        DENY = "deny"
        ASK = "ask"  # a human decides, even a call that would otherwise run (deny → ask → allow)

    class Scope(models.TextChoices):
        CONVERSATION = "conversation"  # one conversation
        AGENT_USER = "agent_user"  # one agent, its creator's own conversations
        AGENT = "agent"  # one agent, everyone's conversations (approvers only)
        GLOBAL = "global"  # every agent, everyone (approvers only)

    class Mode(models.TextChoices):
        LIVE = "live"  # it decides
        SHADOW = "shadow"  # it decides nothing: what it would have done to live calls is recorded (ShadowVerdict)

    effect = models.CharField(max_length=8, choices=Effect.choices)
    mode = models.CharField(
        max_length=8, choices=Mode.choices, default=Mode.LIVE,
        help_text="shadow: tried on live calls without deciding any (approvals.policy.shadow), until promoted to live.",
    )
    tool = models.CharField(max_length=200, help_text="A tool name, or a glob such as notes__*.")
    arguments = models.JSONField(
        default=dict, blank=True,
        help_text='Conditions, all of which must match: {name: glob} or {name: {"regex": "..."}}.',
    )
    after = models.JSONField(
        null=True, blank=True,
        help_text='Applies only after an earlier call of the conversation (approvals.policy.memory): '
        '{"tool", "status": "succeeded", "same": [argument names], "within_seconds"}.',
    )
    at_most = models.JSONField(
        null=True, blank=True, help_text='Decides at most this many calls in any such window: {"count", "within_seconds"}.'
    )
    scope = models.CharField(max_length=16, choices=Scope.choices)
    conversation = models.ForeignKey(
        "chat.Conversation", null=True, blank=True, on_delete=models.CASCADE, related_name="rules"
    )
    agent = models.ForeignKey("chat.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="rules")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    max_uses = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: no limit.")
    uses = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=500, blank=True)
    enabled = models.BooleanField(default=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    made_from = models.ForeignKey(
        "Approval", null=True, blank=True, on_delete=models.SET_NULL, related_name="rules_made",
        help_text="The decision it was saved with (\"Always\" on a card), whose card offers to undo it.",
    )
    history = HistoricalRecords(excluded_fields=["uses", "last_used_at"])  # changes, not uses

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(effect__in=["allow", "deny", "ask"]), name="approvals_rule_effect_valid"),
            models.CheckConstraint(
                condition=Q(scope="conversation", conversation__isnull=False)
                | Q(scope__in=["agent_user", "agent"], agent__isnull=False, conversation__isnull=True)
                | Q(scope="global", agent__isnull=True, conversation__isnull=True),
                name="approvals_rule_scope_target",
            ),
        ]
        indexes = [models.Index(fields=["enabled", "tool"], name="approvals_rule_enabled_tool")]

    def __str__(self) -> str:
        return f"rule #{self.pk}: {self.effect} {self.tool} ({self.scope})"


class ShadowVerdict(models.Model):
    """What a shadow rule would have done to one live call at the gate (approvals.policy.shadow), beside
    what did happen to it, and whether the rule would have changed that."""

    class Happened(models.TextChoices):
        RAN = "ran"  # the policy ran it without asking
        ALLOWED = "allowed"  # a live allow rule approved it
        DENIED = "denied"  # a live deny rule (or a repeat of a rejection) rejected it
        HELD = "held"  # a live ask rule, always-ask pattern or plan held it for a person
        ASKED = "asked"  # the gate asked a person (or the AI reviewer), no rule deciding

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="shadow_verdicts")
    tool_call = models.ForeignKey("chat.ToolCall", on_delete=models.CASCADE, related_name="+")
    outcome = models.CharField(max_length=8, choices=Rule.Effect.choices, help_text="What the rule would have done.")
    happened = models.CharField(max_length=8, choices=Happened.choices)
    changed = models.BooleanField(help_text="Live, the rule would have decided it otherwise than it was.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["rule", "tool_call"], name="approvals_shadow_once_per_call")]


class PolicyVersion(models.Model):
    """One numbered version of what decides calls (agents' gates and tools, rules, routes, tool servers'
    trust, links and pins): who changed it, when, what (a diff), and a hash of the whole policy after
    it (approvals.policy.versions). Linked into the audit chain like a decision; final once made."""

    number = models.PositiveIntegerField(unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    note = models.CharField(max_length=200, blank=True, help_text="Where it came from: the admin, import_policy FILE, …")
    changes = models.JSONField(
        default=list, help_text='[{"model", "object", "action": created|changed|deleted, "fields": {name: [before, after]}}]'
    )
    policy_hash = models.CharField(max_length=64, help_text="SHA-256 of the whole policy as export_policy writes it, after this change.")
    chain_position = models.PositiveBigIntegerField(unique=True)
    previous_hash = models.CharField(max_length=64)
    decision_hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["-number"]

    def __str__(self) -> str:
        return f"policy version {self.number}"


class Webhook(models.Model):
    """A URL told about approvals, for one agent or (with no agent) for all of them."""

    class Event(models.TextChoices):
        REQUESTED = "approval.requested"
        DECIDED = "approval.decided"
        REMINDER = "approval.reminder"
        ESCALATED = "approval.escalated"
        VOTED = "approval.voted"

    agent = models.ForeignKey(
        "chat.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="webhooks",
        help_text="Empty: every agent.",
    )
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=200, help_text="Key of the HMAC-SHA256 signature of each body.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one webhook: the record of its attempts."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="webhook_deliveries")
    event = models.CharField(max_length=32, choices=Webhook.Event.choices)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook} ({self.status})"
