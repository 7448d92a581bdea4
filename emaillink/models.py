from django.conf import settings
from django.db import models

from deliveries.models import Delivery


class EmailPreference(models.Model):
    """A person's choice about approval mails. No row: opted in (once their account has an address)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_preference")
    opted_out = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: {'opted out' if self.opted_out else 'opted in'}"


class EmailDelivery(Delivery):
    """One approval's mail to one person: its request, one reminder when a route's reminder is due,
    one warning when its deadline is near (the life of each is the deliveries base's: queued, sent,
    closed once decided, or failed when the mail server refused it or stayed down through every retry)."""

    class Kind(models.TextChoices):
        REQUEST = "request"
        REMINDER = "reminder"
        WARNING = "warning"

    approval = models.ForeignKey("approvals.Approval", on_delete=models.CASCADE, related_name="email_deliveries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.REQUEST)
    address = models.EmailField(max_length=254, blank=True, help_text="Where its last send went.")

    class Meta:
        verbose_name_plural = "email deliveries"
        constraints = [
            models.UniqueConstraint(fields=["approval", "user", "kind"], name="emaillink_one_mail_of_each_kind_per_person"),
            models.CheckConstraint(condition=models.Q(status__in=["queued", "sent", "closed", "failed"]), name="emaillink_delivery_status_valid"),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="emaillink_status_upd")]

    def __str__(self) -> str:
        return f"approval #{self.approval_id}: {self.kind} to {self.user} ({self.status})"
