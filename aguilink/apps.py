from django.apps import AppConfig


class AguiLinkConfig(AppConfig):
    """Every agent as an AG-UI endpoint (`POST /agui/<slug>/`, server-sent events): a run is a turn of
    the thread's conversation, a pause ends it with interrupts, and the next run's `resume` decides
    them through the same decision service as the chat. Not named `ag_ui`: that is the package it
    is built with."""

    name = "aguilink"
    verbose_name = "AG-UI"
