from django.conf import settings
from django.db import models

from deliveries.models import Delivery


class PushSubscription(models.Model):
    """One browser's push subscription (a device): the push service's endpoint and the keys the
    browser decrypts with. The endpoint is a capability: whoever knows it can reach that browser."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="push_subscriptions")
    endpoint = models.URLField(max_length=1000, unique=True)
    p256dh = models.CharField(max_length=100, help_text="The browser's P-256 public key (base64url).")
    auth = models.CharField(max_length=50, help_text="The browser's authentication secret (base64url).")
    user_agent = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} on {self.device}"

    @property
    def device(self) -> str:
        """A short name for the list of devices: the browser's name and the push service's host."""
        from urllib.parse import urlsplit

        agent = self.user_agent
        browser = next((name for key, name in BROWSERS if key in agent), "A browser")
        return f"{browser} ({urlsplit(self.endpoint).hostname})"

    def subscription_info(self) -> dict:
        return {"endpoint": self.endpoint, "keys": {"p256dh": self.p256dh, "auth": self.auth}}


# Order matters: Edge and Opera say "Chrome" too, Chrome says "Safari".
BROWSERS = [("Edg/", "Edge"), ("OPR/", "Opera"), ("Firefox/", "Firefox"), ("Chrome/", "Chrome"), ("Safari/", "Safari")]


class PushNotification(Delivery):
    """One approval's notification of one kind to one device (its life is the deliveries base's:
    queued, sent while the approval waits, then closed, replaced by the outcome or never sent because
    it was decided first, or failed when the push service refused it). A request asks for the
    decision; a warning, sent once as its deadline nears, replaces it on the device (a row of its
    own, so a restart never warns twice)."""

    class Kind(models.TextChoices):
        REQUEST = "request"
        WARNING = "warning"

    approval = models.ForeignKey("approvals.Approval", on_delete=models.CASCADE, related_name="push_notifications")
    # SET_NULL: a subscription the push service said is gone (404/410) is removed, its failures kept.
    subscription = models.ForeignKey(PushSubscription, null=True, on_delete=models.SET_NULL, related_name="notifications")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    device = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.REQUEST)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["approval", "subscription", "kind"], name="pushlink_one_notification_per_device"),
            models.CheckConstraint(condition=models.Q(status__in=["queued", "sent", "closed", "failed"]), name="pushlink_notification_status_valid"),
            models.CheckConstraint(condition=models.Q(kind__in=["request", "warning"]), name="pushlink_notification_kind_valid"),
        ]
        indexes = [models.Index(fields=["status", "updated_at"], name="pushlink_status_upd")]

    def __str__(self) -> str:
        return f"approval #{self.approval_id}'s {self.kind} to {self.device or 'a removed device'} ({self.status})"
