"""The Redis broker transport, kept from a defect of Celery 5.7.0 with kombu 5.7.0 that kills a
worker for good when Redis restarts (issue 36).

On a lost broker connection the worker's consumer first collects the connection, which sets its
transport's `client` to None, and then closes it (new in Celery 5.7). Closing the consumer's
channel restores its unacknowledged (late-acked) messages, and for that the channel builds a Redis
client from `transport.client`: AttributeError ("'NoneType' object has no attribute 'hostname'",
in kombu's `Channel._connparams`). That is not a connection error, so the consumer does not retry:
the worker logs "Unrecoverable error" and never consumes again (every round of a Redis restart
while a late-acked task ran, before this: tests/e2e/test_faults.py).

Here the transport keeps the connection it was made for: a channel of a lost connection can then
restore its messages (or fail with a connection error while Redis is down, which the consumer
ignores and retries), and a task that finishes after the reconnect can still ack on it. Installed
under kombu's names `redis` and `rediss` (and so `redis+socket`), for every process that talks to
the broker. Remove it once a Celery release no longer sets the client to None before closing
(celery/worker/consumer/consumer.py, on_connection_error_after_connected)."""
from kombu import transport
from kombu.transport import redis


class Transport(redis.Transport):
    @property
    def client(self):
        return self._client

    @client.setter
    def client(self, value) -> None:
        # kombu clears it to break a reference cycle (the collector breaks it as well); a channel
        # still open on this transport needs it to reach Redis.
        if value is not None:
            self._client = value


def install() -> None:
    for name in ("redis", "rediss"):
        transport.TRANSPORT_ALIASES[name] = f"{__name__}:Transport"
