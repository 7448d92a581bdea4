from django.apps import AppConfig


class StepUpConfig(AppConfig):
    """Step-up with passkeys: approving the riskiest calls takes the approver's passkey on the site."""

    name = "stepup"
    verbose_name = "Step-up (passkeys)"

    def ready(self) -> None:
        from profiles.sections import Section, register

        from .views import profile_context

        register(Section("passkeys", "Passkeys", "stepup/profile_section.html", order=5, context=profile_context))
