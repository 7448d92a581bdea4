"""Unit-test settings: eager Celery and the in-memory channel layer. End-to-end tests start real
processes with hitl.settings instead (see tests/e2e/conftest.py)."""
from hitl.settings import *  # noqa: F403

CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
HITL_LLM_RETRY_BACKOFF = 0.01
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
