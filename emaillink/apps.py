from django.apps import AppConfig


class EmailLinkConfig(AppConfig):
    """One-click email as one more surface of the decision service: a request reaches those who may
    decide it as a mail whose link opens a small page (the token is the proof for this one decision);
    a GET shows, only a POST decides."""

    name = "emaillink"
    verbose_name = "Email approvals"

    def ready(self) -> None:
        from approvals.signals import (
            approval_edited, approval_requested, approvals_decided, approvals_escalated, approvals_expiring, approvals_reminded,
        )

        from hitl.masking import mask_admin_emails, mask_daphne_access_log
        from profiles.sections import Section, register

        from . import receivers
        from .views import profile_context

        mask_daphne_access_log()  # this page's address holds its token: daphne's access log must not print it
        mask_admin_emails()  # nor the error mail to ADMINS (its URL, its Referer, its frames' variables)
        register(Section("email", "Email", "emaillink/profile_section.html", order=25, context=profile_context))

        approval_requested.connect(receivers.on_approval_requested, dispatch_uid="emaillink.on_requested")
        approval_edited.connect(receivers.on_approval_edited, dispatch_uid="emaillink.on_edited")
        approvals_escalated.connect(receivers.on_approvals_escalated, dispatch_uid="emaillink.on_escalated")
        approvals_reminded.connect(receivers.on_approvals_reminded, dispatch_uid="emaillink.on_reminded")
        approvals_expiring.connect(receivers.on_approvals_expiring, dispatch_uid="emaillink.on_expiring")
        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="emaillink.on_decided")
