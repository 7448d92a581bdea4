from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"

    def ready(self) -> None:
        from approvals.signals import approvals_decided

        from . import demo_tools, llm, receivers  # noqa: F401  (register tools and the provider)

        approvals_decided.connect(receivers.on_approvals_decided, dispatch_uid="chat.on_approvals_decided")
