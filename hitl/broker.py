"""The Redis broker transport, kept from a defect of Celery 5.7.0 with kombu 5.7.0 that kills a
worker for good when Redis restarts (issue 36).

On a lost broker connection the worker's consumer first collects the connection, which sets its
transport's `client` to None, and then closes it (new in Celery 5.7). Closing the consumer's
channel restores its unacknowledged (late-acked) messages, and for that the channel builds a Redis
client from `transport.client`: AttributeError ("'NoneType' object has no attribute 'hostname'",
in kombu's `Channel._connparams`). That is not a connection error, so the consumer does not retry:
the worker logs "Unrecoverable error" and never consumes again (every round of a Redis restart
while a late-acked task ran, before this: tests/e2e/faults/test_faults.py).

Here a channel whose connection was collected says so as a connection error (redis-py's
ConnectionError), which the consumer ignores while it closes the lost connection and then
reconnects, as Celery 5.6 did; its unacknowledged messages stay in Redis's unacked set, restored
as kombu restores any lost consumer's. A task that finishes after the reconnect fails to ack on the
old channel the same way, logged by kombu ("Failed to acknowledge"), and its message comes back
later, to be taken under the conversation's lease. Installed under kombu's names `redis` and
`rediss` (and so `redis+socket`) by hitl/celery.py, for every process that talks to the broker. Remove it once a
Celery release no longer collects the connection before closing it
(celery/worker/consumer/consumer.py, on_connection_error_after_connected)."""
import redis as redis_client
from kombu.transport import redis


class Channel(redis.Channel):
    def _connparams(self, asynchronous=False):
        if self.connection.client is None:  # collected: the connection it belonged to is gone
            raise redis_client.ConnectionError("This broker connection was lost and collected; the consumer reconnects.")
        return super()._connparams(asynchronous=asynchronous)


class Transport(redis.Transport):
    Channel = Channel

