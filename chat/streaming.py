"""A model's answer shown as it is written: the streamed text pushed to the conversation's group."""
import time

from django.conf import settings

from core import live
from core.db import release_connection

from . import fragments, lease
from .llm import Stopped

STREAM_FLUSH_SECONDS = 0.05
STOP_CHECK_SECONDS = 0.25  # how often a streaming answer looks whether the run was stopped


class AnswerStream:
    """Publishes streamed text to the conversation's group, batched so a fast model is not one
    channel-layer send per token. A long answer also renews the lease now and then, so nobody
    takes the conversation over while the model is still talking, and looks a few times a second
    whether the run was stopped: then it ends the answer (Stopped), so a stopped run neither shows
    nor pays for the rest of it."""

    def __init__(self, conversation_id, token: str):
        self.conversation_id, self.token = conversation_id, token
        self.group = live.conversation_group(conversation_id)
        self.pending: list[str] = []
        self.last_flush = float("-inf")  # the first words go at once, however long the machine has been up
        self.last_renewal = self.last_check = time.monotonic()
        self.sent_any = False

    def add(self, text: str) -> None:
        self.pending.append(text)
        now = time.monotonic()
        if now - self.last_check >= STOP_CHECK_SECONDS:
            self.last_check = now
            advancing = lease.is_held(self.conversation_id, self.token)
            if now - self.last_renewal >= settings.HITL_LOOP_LEASE_SECONDS / 4:
                lease.renew(self.conversation_id, self.token)
                self.last_renewal = now
            release_connection()  # between checks the stream only waits for the model
            if not advancing:
                raise Stopped
        if now - self.last_flush >= STREAM_FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            live.push_now(self.group, fragments.stream_delta_html(self.conversation_id, "".join(self.pending)))
            self.pending, self.sent_any = [], True
        self.last_flush = time.monotonic()

    def cleared(self) -> None:
        """The stored message's push has cleared the streamed copy."""
        self.pending, self.sent_any = [], False

    def reset(self) -> None:
        self.pending = []
        if self.sent_any:
            live.push_now(self.group, fragments.stream_reset_html(self.conversation_id))
            self.sent_any = False
