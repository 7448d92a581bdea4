"""What AG-UI needs remembered beyond the conversation: which run posted which user message, so that
a client retrying a run (a dropped connection, a proxy's retry) is shown that run again instead of
posting its message twice."""
import hashlib

from django.db import models

from chat.models import Conversation


class PostedRun(models.Model):
    """An AG-UI run that posted a user message to its thread's conversation."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    run_key = models.CharField(max_length=64, help_text="sha256 of the run's runId (any length, any text).")
    position = models.PositiveIntegerField(help_text="The position of the user message the run posted.")
    after = models.PositiveIntegerField(help_text="The position the run streamed from: a retry streams from there again.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["conversation", "-position"], name="aguilink_run_latest")]

    def __str__(self) -> str:
        return f"{self.conversation_id}@{self.position}"

    @staticmethod
    def key(run_id: str) -> str:
        return hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).hexdigest()
