from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    """The profile page: where a person sets how they are reached (Telegram, Slack, email, this
    device's notifications). Each surface app adds its own section (profiles.sections)."""

    name = "profiles"
    verbose_name = "Profile"
