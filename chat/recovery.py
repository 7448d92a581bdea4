"""When a conversation should move again: after its last decision, or when the sweeper finds it
stalled. These flip it to `running`; the caller enqueues the loop."""
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from approvals.models import Approval

from . import loop
from .models import Conversation
from .selectors import stalled_conversations


def resume_if_decided(conversation_id) -> bool:
    """True once no call of the turn waits for a human. The conditional update on
    `waiting_for_approval` lets exactly one of several concurrent deciders through."""
    if Approval.objects.filter(conversation_id=conversation_id, status=Approval.Status.PENDING).exists():
        return False
    resumed = Conversation.objects.filter(
        pk=conversation_id, status=Conversation.Status.WAITING_FOR_APPROVAL
    ).update(status=Conversation.Status.RUNNING, updated_at=timezone.now())
    if resumed:
        loop.push_status(Conversation(pk=conversation_id, status=Conversation.Status.RUNNING))
    return bool(resumed)


def claim_stalled() -> list[str]:
    """Ids of conversations whose stored state says they should be advancing but nobody is."""
    stalled = stalled_conversations(stalled_for=timedelta(seconds=settings.HITL_STALL_SECONDS))
    claimed = []
    for conversation in stalled.only("pk", "status"):
        if conversation.status == Conversation.Status.WAITING_FOR_APPROVAL:
            if resume_if_decided(conversation.pk):
                claimed.append(str(conversation.pk))
        elif Conversation.objects.filter(pk=conversation.pk, status=Conversation.Status.RUNNING).update(
            updated_at=timezone.now()
        ):
            claimed.append(str(conversation.pk))
    return claimed
