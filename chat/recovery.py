"""When a conversation should move again: after its last decision, or when the sweeper finds it
stalled. These flip it to `running`; the caller enqueues the loop."""
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from approvals.models import Approval

from . import messages
from .models import Conversation
from .selectors import stalled_conversations


def resume_if_decided(conversation_id) -> bool:
    """True once no call of the turn waits for a human (and the conversation was flipped to running)."""
    return bool(resume_decided([conversation_id]))


def resume_decided(conversation_ids) -> list:
    """Flip to `running` those of the conversations that wait for approval with no call left
    pending, and return their ids, in a number of queries that does not grow with them.

    Each decider's receiver asks after its own commit, so whoever commits the last decision of a
    turn finds nothing pending. The rows are locked whatever their status, then read (PostgreSQL;
    SQLite's IMMEDIATE transaction holds the write lock): a worker that is setting `waiting` right
    now holds its row, so we wait and see `waiting`. (Locking only rows *already* waiting skipped
    such a row unseen, while the worker had read the call as pending a moment before our decision
    committed: the conversation then waited for nothing.) Only those still waiting are flipped: of
    several concurrent deciders exactly one resumes a conversation.
    """
    ids = set(conversation_ids)
    with transaction.atomic():
        locked = Conversation.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", "status")
        waiting = {pk for pk, status in locked if status == Conversation.Status.WAITING_FOR_APPROVAL}
        still_pending = Approval.objects.filter(conversation_id__in=waiting, status=Approval.Status.PENDING).exclude(
            tool_call__undo_of__isnull=False  # an undo waits on its own, outside the model's turn (chat.undo)
        )
        resumed = sorted(waiting - set(still_pending.values_list("conversation_id", flat=True)))
        Conversation.objects.filter(pk__in=resumed).update(status=Conversation.Status.RUNNING, updated_at=timezone.now())
        for conversation_id in resumed:
            messages.push_status(Conversation(pk=conversation_id, status=Conversation.Status.RUNNING))
    return resumed


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
