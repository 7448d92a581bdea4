"""Approval: the stored human decision about one gated tool call. Once decided it never changes."""
from django.conf import settings
from django.db import models
from django.db.models import Q


class Risk(models.TextChoices):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class DecidedVia(models.TextChoices):
    CHAT = "chat"
    DASHBOARD = "dashboard"
    API = "api"
    TEXT = "text"
    TIMEOUT = "timeout"


class Approval(models.Model):
    Status = ApprovalStatus
    Via = DecidedVia

    tool_call = models.OneToOneField("chat.ToolCall", on_delete=models.PROTECT, related_name="approval")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.PROTECT, related_name="approvals")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", help_text="The conversation's owner."
    )
    reason = models.TextField(help_text="Why the policy asked for approval.")
    risk = models.CharField(max_length=16, choices=Risk.choices, default=Risk.MEDIUM)
    arguments_hash = models.CharField(max_length=64, help_text="Hash of the arguments shown, and so approved.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    requested_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_via = models.CharField(max_length=16, choices=Via.choices, blank=True)
    rejection_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["requested_at", "id"]
        permissions = [("decide_approval", "Can decide other users' approvals")]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=ApprovalStatus.values), name="approvals_approval_status_valid"),
            models.CheckConstraint(condition=Q(risk__in=Risk.values), name="approvals_approval_risk_valid"),
            models.CheckConstraint(
                condition=Q(status="pending", decided_at__isnull=True)
                | (~Q(status="pending") & Q(decided_at__isnull=False)),
                name="approvals_approval_decided_at_iff_decided",
            ),
        ]
        indexes = [
            models.Index(fields=["requested_at"], condition=Q(status="pending"), name="approvals_pending_by_age"),
            models.Index(fields=["conversation", "status"], name="approvals_conv_status"),
        ]

    def __str__(self) -> str:
        return f"approval #{self.pk} ({self.status})"
