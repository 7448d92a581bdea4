"""The broker transport every process resolves for a redis:// URL (hitl/broker.py)."""
import pytest
import redis
from kombu import Connection

from hitl.broker import Transport
from hitl.celery import app


def test_every_redis_url_resolves_the_kept_transport():
    for url in ("redis://127.0.0.1:6379/0", "rediss://127.0.0.1:6380/0", app.conf.broker_url):
        assert Connection(url).get_transport_cls() is Transport, url


def test_a_channel_whose_connection_was_collected_raises_a_connection_error():
    """What the consumer retries on: not the AttributeError that stopped a worker for good."""
    connection = Connection("redis://127.0.0.1:9/0")
    channel = Transport.Channel.__new__(Transport.Channel)
    channel.connection = connection.transport
    connection.transport.client = None
    with pytest.raises(redis.ConnectionError, match="lost and collected"):
        channel._connparams()
