"""Thin Celery tasks: advance a conversation; sweep for stalled ones."""
import gc
import logging

from celery import shared_task
from celery.signals import worker_init, worker_process_init

from . import llm, loop, recovery

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def advance_conversation(self, conversation_id: str) -> None:
    # The task id names the lease holder: a redelivery of this same task may take the lease over.
    loop.advance(conversation_id, token=self.request.id or "")


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_undo(tool_call_id: int) -> None:
    # Decided outside any model turn (chat.undo): applied, and run once if approved (the loop's claim).
    loop.settle_alone(tool_call_id)


@shared_task(ignore_result=True)
def recover_stalled() -> None:
    for conversation_id in recovery.claim_stalled():
        logger.info("re-enqueueing stalled conversation %s", conversation_id)
        advance_conversation.delay(conversation_id)


@worker_process_init.connect
def warm_up_litellm(**kwargs) -> None:
    """Import litellm and make one scripted call in each process that runs tasks (a prefork pool's
    children; see below for the others), so a user's first turn does not pay the seconds it costs."""
    llm.complete(model="scripted/warm-up", messages=[{"role": "user", "content": "hello"}], tools=[])
    # What litellm's import loaded lives as long as the process: out of the collector's sight too
    # (hitl.celery froze what was loaded before it, when the worker started).
    gc.collect()
    gc.freeze()


@worker_init.connect
def warm_up_a_pool_without_children(sender, **kwargs) -> None:
    """A threads (or solo) pool runs tasks in the worker's own process: warm it before it consumes."""
    if "prefork" not in str(getattr(sender, "pool_cls", "prefork")):
        warm_up_litellm()
