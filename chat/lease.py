"""The lease on a conversation: which task advances it, and until when. A step claims it, renews
it while it works, and gives it up with the status it leaves (loop._set_status); a Stop clears it, so
the holder learns at its next look that the run is no longer its own."""
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from .models import Conversation


def claim(conversation_id, token: str) -> bool:
    """Only `running` conversations are advanced: whoever wants one moved (a new message, the last
    decision, the sweeper) sets `running` first, so a stray task finds nothing to do."""
    now = timezone.now()
    running = Conversation.objects.filter(pk=conversation_id, status=Conversation.Status.RUNNING)
    claimable = running.filter(Q(advancing_token="") | Q(advancing_until__lt=now) | Q(advancing_token=token))
    return bool(claimable.update(advancing_token=token, advancing_until=now + _duration()))


def renew(conversation_id, token: str) -> None:
    Conversation.objects.filter(pk=conversation_id, advancing_token=token).update(advancing_until=timezone.now() + _duration())


def is_held(conversation_id, token: str) -> bool:
    """Whether the conversation is still running and still `token`'s."""
    return _held(conversation_id, token).exists()


def lock_if_held(conversation: Conversation, token: str) -> bool:
    """Lock the conversation if it is still running and still ours (a Stop clears the lease), in
    one statement: on PostgreSQL a row being changed is waited for and read again as changed."""
    return _held(conversation.pk, token).select_for_update().exists()


def _held(conversation_id, token: str):
    return Conversation.objects.filter(pk=conversation_id, status=Conversation.Status.RUNNING, advancing_token=token)


def _duration() -> timedelta:
    return timedelta(seconds=settings.HITL_LOOP_LEASE_SECONDS)
