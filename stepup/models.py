"""A person's passkeys, and the challenges the site issued for them (each good once, briefly)."""
from django.conf import settings
from django.db import models
from django.db.models import Q


class Passkey(models.Model):
    """A WebAuthn credential registered on the profile page; its assertions approve step-up calls."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="passkeys")
    credential_id = models.CharField(max_length=1400, unique=True, help_text="base64url, as the browser names it.")
    public_key = models.BinaryField(help_text="The COSE public key the authenticator registered.")
    sign_count = models.PositiveBigIntegerField(default=0, help_text="The authenticator's counter at its last use (a clone shows an older one).")
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.user})"


class Challenge(models.Model):
    """A random challenge the site issued: to register a passkey, or to approve one approval at one
    version. Used at most once: the conditional update of `used_at` is the claim."""

    class Purpose(models.TextChoices):
        REGISTER = "register"
        APPROVE = "approve"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    challenge = models.CharField(max_length=100, unique=True, help_text="base64url of the random bytes sent.")
    approval = models.ForeignKey("approvals.Approval", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    shown_hash = models.CharField(max_length=64, blank=True, help_text="The version the challenge was issued for.")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(purpose__in=["register", "approve"]), name="stepup_challenge_purpose_valid"),
            models.CheckConstraint(
                condition=Q(purpose="register", approval__isnull=True) | Q(purpose="approve", approval__isnull=False),
                name="stepup_challenge_approve_names_approval",
            ),
        ]
        indexes = [models.Index(fields=["expires_at"], name="stepup_challenge_expires")]

    def __str__(self) -> str:
        return f"{self.purpose} challenge for {self.user}"
