from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    """The base every outside channel stands on (Slack, Telegram, email, push): the outbox row of
    one approval shown to one person and its life (queued, claimed, sent with retries and backoff,
    swept when a task is lost, closed to the outcome), one-time link codes, and one wiring of the
    decision service's signals to every channel. A channel is a small module that says how to send,
    update and read a press (channels.Channel, in the manner of healthchecks' integrations)."""

    name = "deliveries"
    verbose_name = "Channel deliveries"

    def ready(self) -> None:
        from . import receivers

        receivers.connect()
