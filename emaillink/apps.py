from django.apps import AppConfig


class EmailLinkConfig(AppConfig):
    """One-click email as one more surface of the decision service: a request reaches those who may
    decide it as a mail whose link opens a small page (the token is the proof for this one decision);
    a GET shows, only a POST decides."""

    name = "emaillink"
    verbose_name = "Email approvals"

    def ready(self) -> None:
        from deliveries.channels import register as register_channel
        from core.masking import mask_admin_emails, mask_daphne_access_log
        from profiles.sections import Section, register

        from .channel import CHANNEL
        from .views import profile_context

        mask_daphne_access_log()  # this page's address holds its token: daphne's access log must not print it
        mask_admin_emails()  # nor the error mail to ADMINS (its URL, its Referer, its frames' variables)
        register(Section("email", "Email", "emaillink/profile_section.html", order=25, context=profile_context))
        register_channel(CHANNEL)
