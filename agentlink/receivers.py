"""agentlink listens to the chat's rows: a user message that starts the next turn ends the open
task; and a task's state changes (a message stored, an approval asked, decided or edited) are
POSTed to the push notification configs of its clients (agentlink.push). The loop knows nothing of
either."""
import logging

from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_save
from django.dispatch import receiver

from approvals.signals import approval_edited, approval_requested, approvals_decided
from chat.models import Message

from . import push, runs
from .models import PushConfig, Task

logger = logging.getLogger(__name__)


def on_message_saved(sender, instance: Message, created: bool = False, raw: bool = False, **kwargs) -> None:
    if not created or raw or instance.role != Message.Role.USER:
        return
    if Task.objects.filter(conversation_id=instance.conversation_id, final_state="").exists():
        runs.close_turn(instance)


@receiver(post_save, sender=Message, dispatch_uid="agentlink.push_on_message")
def push_on_message(sender, instance: Message, created: bool = False, raw: bool = False, **kwargs) -> None:
    """A message may move a task (its answer, a stop, the next turn closing it): looked at once committed."""
    if created and not raw:
        conversation_id, position = instance.conversation_id, instance.position
        transaction.on_commit(lambda: _notify(conversation_id, closed_at=position), robust=True)


@receiver(approval_requested, dispatch_uid="agentlink.push_on_requested")
@receiver(approval_edited, dispatch_uid="agentlink.push_on_edited")
def push_on_approval(sender, approval, **kwargs) -> None:
    _notify(approval.conversation_id)


@receiver(approvals_decided, dispatch_uid="agentlink.push_on_decided")
def push_on_decided(sender, approvals, **kwargs) -> None:
    _notify(*{approval.conversation_id for approval in approvals})  # one look for a bulk decision's conversations


def _notify(*conversation_ids, closed_at: int | None = None) -> None:
    """Queue a look at the conversations' tasks that have push configs: the open one, and the one
    the message at `closed_at` just ended."""
    which = Q(task__final_state="") | (Q(task__end_position=closed_at) if closed_at is not None else Q(pk__in=[]))
    task_ids = set(PushConfig.objects.filter(which, task__conversation_id__in=conversation_ids).values_list("task_id", flat=True))
    for task_id in task_ids:
        try:
            push.notify.delay(str(task_id))
        except Exception:  # a broker down loses a notification, never the work that was signalled
            logger.exception("a2a push: could not queue a look at task %s", task_id)
