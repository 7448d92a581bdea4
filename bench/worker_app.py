"""The app's Celery app with one bench-only task, so the Celery floor is measured through the very
worker process (same settings, same queue) that runs the agent loop:

    celery -A bench.worker_app worker ...     # instead of `celery -A hitl worker ...`

`bench.ping` does the least a task can do and still be seen: one RPUSH to Redis, which the
benchmark waits for with BLPOP.
"""
import os

import redis
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")

from hitl.celery import app  # noqa: E402

if os.environ.get("HITL_BENCH_COUNTS"):  # the bench counts each loop task's statements and pushes (bench/counts.py)
    from bench import counts

    counts.install(os.environ["HITL_BENCH_COUNTS"])

_client = None


@app.task(name="bench.ping", ignore_result=True, acks_late=True)
def ping(key: str) -> None:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL)
    _client.rpush(key, "1")  # BLPOP on the other side pops it, and the empty list is gone
