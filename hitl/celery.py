"""The Celery app; it autodiscovers each app's tasks.py."""
import gc
import os

from celery import Celery
from celery.signals import worker_init, worker_process_init
from django.db import transaction
from kombu import transport

from core import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")
# Before any connection resolves the transport, by name: hitl/broker.py imports redis-py, which
# loads OpenTelemetry's SDK wherever it is installed, and only processes that connect need it.
for scheme in ("redis", "rediss"):
    transport.TRANSPORT_ALIASES[scheme] = "hitl.broker:Transport"

app = Celery("hitl")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def freeze_what_is_loaded(**kwargs) -> None:
    """Everything the imports loaded (Django, litellm: ~300,000 objects) lives as long as the
    worker: out of the collector's sight, so that a full collection walks what the steps made, not
    all of it (~240 ms each, a few a minute under load; issue 24). Before the pool starts, so
    forked pool processes inherit it."""
    gc.collect()
    gc.freeze()


@worker_init.connect
def push_through_one_loop(**kwargs) -> None:
    """A worker (and each pool process it forks) pushes to browsers through one long-lived event loop."""
    from core import live

    live.use_own_loop()


@worker_process_init.connect
def trace_a_pool_process(**kwargs) -> None:
    """OpenTelemetry (core.telemetry, if configured) in each prefork child, after the fork, as the
    Celery instrumentation asks: the exporters' threads would not survive it."""
    telemetry.setup()


@worker_init.connect
def trace_a_pool_without_children(sender, **kwargs) -> None:
    """A threads (or solo) pool runs tasks in the worker's own process: OpenTelemetry there."""
    if "prefork" not in str(getattr(sender, "pool_cls", "prefork")):
        telemetry.setup()


def enqueue_on_commit(task, *args) -> None:
    """Send a task once the transaction commits. Robust: if the broker is down, the error is logged
    and the request still succeeds, since what was committed is safe and the sweepers pick it up."""
    transaction.on_commit(lambda: task.delay(*args), robust=True)
