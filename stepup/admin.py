from django.contrib import admin

from .models import Passkey


@admin.register(Passkey)
class PasskeyAdmin(admin.ModelAdmin):
    """Read-only: a passkey is added by its owner's own authenticator, never typed in here."""

    list_display = ("name", "user", "created_at", "last_used_at", "sign_count")
    readonly_fields = ("user", "credential_id", "sign_count", "name", "created_at", "last_used_at")
    exclude = ("public_key",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
