"""The admin of what decides calls: each row's History (django-simple-history), and each form,
delete or action saved as one policy version naming the admin (approvals.policy.versions)."""
from simple_history.admin import SimpleHistoryAdmin

from . import versions as policy_versions


class PolicyHistoryAdmin(SimpleHistoryAdmin):
    """A POST here (a form with its inlines and many-to-many fields, a delete, an action) is one version."""

    def changeform_view(self, request, *args, **kwargs):
        if request.method != "POST":
            return super().changeform_view(request, *args, **kwargs)
        with policy_versions.recording(user=request.user, note="admin"):
            return super().changeform_view(request, *args, **kwargs)

    def delete_view(self, request, *args, **kwargs):
        if request.method != "POST":
            return super().delete_view(request, *args, **kwargs)
        with policy_versions.recording(user=request.user, note="admin"):
            return super().delete_view(request, *args, **kwargs)

    def changelist_view(self, request, *args, **kwargs):
        if request.method != "POST":
            return super().changelist_view(request, *args, **kwargs)
        with policy_versions.recording(user=request.user, note="admin"):
            return super().changelist_view(request, *args, **kwargs)
