"""agentlink's Celery tasks: a Stop's cancel of a remote agent's task, off the request that stopped."""
from celery import shared_task

from . import remote
from .models import RemoteAgent


@shared_task(ignore_result=True)
def cancel_remote_task(remote_id: int, task_id: str) -> None:
    """Cancel the remote agent's task (A2A tasks/cancel), best effort: one that is over already is logged."""
    found = RemoteAgent.objects.filter(pk=remote_id).first()
    if found is not None:
        remote.cancel_task(found, task_id)
