"""agentlink listens to the chat's rows: a user message that starts the next turn ends the open task."""
from chat.models import Message

from . import runs
from .models import Task


def on_message_saved(sender, instance: Message, created: bool = False, raw: bool = False, **kwargs) -> None:
    if not created or raw or instance.role != Message.Role.USER:
        return
    if Task.objects.filter(conversation_id=instance.conversation_id, final_state="").exists():
        runs.close_turn(instance)
