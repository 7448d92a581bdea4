"""Unit-test settings: eager Celery and the in-memory channel layer. End-to-end tests start real
processes with hitl.settings instead (see tests/e2e/conftest.py)."""
import os

os.environ.setdefault("DEBUG", "1")  # settings fail closed (DEBUG off) unless told otherwise

from hitl.settings import *  # noqa: E402, F403

CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
HITL_LLM_RETRY_BACKOFF = 0.01
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The suite starts many conversations a minute; tests/security/test_rate_limits.py turns quotas on.
HITL_QUOTA_CONVERSATIONS_PER_HOUR = HITL_QUOTA_MESSAGES_PER_MINUTE = HITL_QUOTA_MODEL_CALLS_PER_HOUR = 0
HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR = 0
if "TEST" in DATABASES["default"]:  # noqa: F405  (SQLite)
    # A test database of each pytest process's own: two runs at once in one checkout never share one.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_db_{os.getpid()}.sqlite3")}  # noqa: F405
# A fuzzed ?wait=60 would hold each case for a minute: the unit tests' long polls are short.
HITL_API_MAX_WAIT_SECONDS = 3
