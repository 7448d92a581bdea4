from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"

    def ready(self) -> None:
        from approvals.signals import approval_decided

        from . import demo_tools, llm, receivers  # noqa: F401  (register tools and the provider)

        approval_decided.connect(receivers.on_approval_decided, dispatch_uid="chat.on_approval_decided")
