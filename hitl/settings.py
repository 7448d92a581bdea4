"""Every setting, read from the environment with a default that works offline on one machine."""
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

# litellm must not fetch its model cost map from the internet at import time.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("HITL_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# Fail closed: without an environment this is production (DEBUG off), which refuses to start
# without a SECRET_KEY. `make run` and the tests turn debug on explicitly.
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off, and DEBUG is off unless DEBUG=1 is set. In production "
            "set SECRET_KEY (e.g. python3 -c \"import secrets; print(secrets.token_urlsafe(50))\"); for local "
            "development run with DEBUG=1, as `make run` does."
        )
    SECRET_KEY = "django-insecure-local-development-only"

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",
    "csp",
    "axes",
    "simple_history",  # versions of what decides calls (approvals.policy.versions)
    "core",  # the ground every app stands on (live pushes, inputs, telemetry): imports no other app
    "chat",
    "approvals",
    "toolservers",
    "agentlink",
    "deliveries",
    "telegramlink",
    "profiles",
    "emaillink",
    "pushlink",
    "slacklink",
    "mcpgateway",
    "aguilink",
    "stepup",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "core.middleware.JsonApiMethodNotAllowed",
    "core.middleware.DatabaseUnavailable",
    "simple_history.middleware.HistoryRequestMiddleware",  # who changed the policy: the signed-in user
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

# Production (DEBUG=0) is HTTPS-only by default; each of these can be turned off for a special setup.
SECURE_SSL_REDIRECT = env_bool("HITL_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("HITL_SECURE_COOKIES", not DEBUG)
SECURE_HSTS_SECONDS = int(os.environ.get("HITL_HSTS_SECONDS", "0" if DEBUG else "31536000"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HITL_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("HITL_HSTS_PRELOAD", not DEBUG)
if env_bool("HITL_BEHIND_PROXY", False):  # a TLS-terminating proxy sets X-Forwarded-Proto
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# Scripts only from our own static files (htmx is vendored): an injected <script> or on* attribute
# does not run. Styles may be inline (the admin uses style attributes). 'self' covers ws(s) to us.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

ROOT_URLCONF = "hitl.urls"
ASGI_APPLICATION = "hitl.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.context_processors.inbox_count",
            ],
        },
    },
]

# SQLite in var/ by default: WAL so readers never block the writer, and IMMEDIATE transactions so
# two writers queue on BEGIN instead of failing with "database is locked" halfway through.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"), conn_max_age=600
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Django's backend, with writers queued on a file lock rather than polling (core/sqlite_backend).
    DATABASES["default"]["ENGINE"] = "core.sqlite_backend"
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_db.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A pool per process (psycopg_pool): a worker's hundred threads mostly wait for a model, and give
    # their connection back while they do (core.db.release_connection), so a few connections serve
    # them all, well inside PostgreSQL's max_connections (100 by default) with daphne and beat beside.
    # Pooled connections are never kept by Django itself (CONN_MAX_AGE must be 0).
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": int(os.environ.get("HITL_DB_POOL_SIZE", "20")),
        "timeout": 30,  # seconds a thread waits for a free connection before its step fails (and is retried)
    }
    # Each pooled connection is checked (one empty query) as it is handed out (Django passes the pool
    # ConnectionPool.check_connection): after PostgreSQL restarts, the pool's dead connections are
    # replaced, not handed to requests that would then fail (tests/e2e/faults/test_faults.py).
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"

# Login lockout (django-axes; the admin's login too): after HITL_LOGIN_FAILURES wrong passwords for
# one username from one address, that pair is refused for HITL_LOGIN_LOCKOUT_MINUTES (429).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("HITL_LOGIN_FAILURES", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("HITL_LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Per-user quotas (0: none): conversations started an hour, messages a minute, model calls an hour.
# Past one, the API answers 429 with Retry-After and the page says when to try again.
HITL_QUOTA_CONVERSATIONS_PER_HOUR = int(os.environ.get("HITL_QUOTA_CONVERSATIONS_PER_HOUR", "30"))
HITL_QUOTA_MESSAGES_PER_MINUTE = int(os.environ.get("HITL_QUOTA_MESSAGES_PER_MINUTE", "20"))
HITL_QUOTA_MODEL_CALLS_PER_HOUR = int(os.environ.get("HITL_QUOTA_MODEL_CALLS_PER_HOUR", "300"))
# Outside approval requests and MCP gateway calls: a quota of their own, never the owner's chat's.
HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR = int(os.environ.get("HITL_QUOTA_OUTSIDE_REQUESTS_PER_HOUR", "1000"))
# web_fetch: the whole call (lookup, connection, reading the body) ends after this many seconds.
HITL_FETCH_SECONDS = float(os.environ.get("HITL_FETCH_SECONDS", "10"))
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("HITL_STATIC_ROOT", VAR_DIR / "static"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# In development whitenoise serves straight from the apps' static folders; production runs collectstatic.
WHITENOISE_USE_FINDERS = DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Redis: Celery broker and Channels layer. Unset, the Redis of this checkout: `make run` starts it on
# a unix socket in the var directory (bin/local-redis), so two checkouts on one machine never share
# one (each one's workers would take the other's tasks). A Redis someone else runs is used only when
# REDIS_URL names it.
REDIS_URL = os.environ.get("REDIS_URL") or f"unix://{VAR_DIR.resolve() / 'redis.sock'}"

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 defaults to a 5 s socket timeout, which makes channels-redis 4.3 drop idle
        # websockets after about 5 s; no timeout on the blocking reads fixes it.
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
    }
}

# Kombu names a unix socket redis+socket:// (redis-py and channels-redis take unix://).
CELERY_BROKER_URL = f"redis+socket://{REDIS_URL[len('unix://'):]}" if REDIS_URL.startswith("unix://") else REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker runs many conversations at once, in threads of one process: a step is milliseconds of
# CPU and then seconds of waiting for the model (or a tool), with the GIL released. Sizing: see the
# docs/operations.md ("How many workers"). `celery -A hitl worker` takes both from here; flags override them.
CELERY_WORKER_POOL = os.environ.get("HITL_WORKER_POOL", "threads")
CELERY_WORKER_CONCURRENCY = int(os.environ.get("HITL_WORKER_CONCURRENCY", "100"))
# A prefork child imports litellm before it says it is up (chat.tasks): seconds on a busy machine,
# where Celery's default of 4 s kills and re-forks it, again and again.
CELERY_WORKER_PROC_ALIVE_TIMEOUT = 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# On a lost broker connection, let a running step finish (Celery 6 will cancel it by default): a
# step is idempotent under its lease, a tool it runs must not be cut halfway, and its message comes
# back to the queue (hitl/broker.py keeps that working across a Redis restart).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_BEAT_SCHEDULE = {
    "recover-stalled-conversations": {
        "task": "chat.tasks.recover_stalled",
        "schedule": float(os.environ.get("HITL_SWEEP_SECONDS", "15")),
    },
    "expire-overdue-approvals": {
        "task": "approvals.tasks.expire_overdue_approvals",
        "schedule": float(os.environ.get("HITL_EXPIRY_SWEEP_SECONDS", "5")),
    },
    "warn-expiring-approvals": {
        "task": "approvals.tasks.warn_expiring_approvals",
        "schedule": float(os.environ.get("HITL_EXPIRY_SWEEP_SECONDS", "5")),
    },
    "remind-and-escalate-approvals": {
        "task": "approvals.tasks.remind_and_escalate",
        "schedule": float(os.environ.get("HITL_ESCALATION_SWEEP_SECONDS", "5")),
    },
    "escalate-overdue-reviews": {
        "task": "approvals.tasks.escalate_overdue_reviews",
        "schedule": float(os.environ.get("HITL_EXPIRY_SWEEP_SECONDS", "5")),
    },
    "resend-lost-webhooks": {
        "task": "approvals.tasks.resend_lost_webhooks",
        "schedule": float(os.environ.get("HITL_WEBHOOK_SWEEP_SECONDS", "60")),
    },
    # Every channel's outbox (deliveries): what a lost task or signal left, sent, closed or warned again.
    "sweep-channel-deliveries": {
        "task": "deliveries.tasks.sweep",
        "schedule": float(os.environ.get("HITL_DELIVERY_SWEEP_SECONDS", "30")),
    },
}

# The agent loop.
HITL_LLM_TIMEOUT = float(os.environ.get("HITL_LLM_TIMEOUT", "60"))
HITL_LLM_RETRIES = int(os.environ.get("HITL_LLM_RETRIES", "2"))
HITL_LLM_RETRY_BACKOFF = float(os.environ.get("HITL_LLM_RETRY_BACKOFF", "1.0"))
# How long one advance may hold a conversation before another task may take it over.
HITL_LOOP_LEASE_SECONDS = float(os.environ.get("HITL_LOOP_LEASE_SECONDS", "300"))
# A running conversation that has not moved for this long is re-enqueued by the sweeper.
HITL_STALL_SECONDS = float(os.environ.get("HITL_STALL_SECONDS", "60"))
# A pending approval's channels and conversation are warned before it expires: at this share of its
# wait (and at least a minute before the deadline). It may be extended once, by at most the agent's timeout.
HITL_EXPIRY_WARNING_AT = float(os.environ.get("HITL_EXPIRY_WARNING_AT", "0.8"))
# Which risks a notification (push, Telegram, Slack) shows as its sentence only, without arguments or
# preview: the person opens the site to see and approve. Comma-separated, per channel.
HITL_PUSH_SENTENCE_ONLY_RISKS = [r for r in os.environ.get("HITL_PUSH_SENTENCE_ONLY_RISKS", "high,critical").split(",") if r.strip()]
HITL_TELEGRAM_SENTENCE_ONLY_RISKS = [r for r in os.environ.get("HITL_TELEGRAM_SENTENCE_ONLY_RISKS", "").split(",") if r.strip()]
HITL_SLACK_SENTENCE_ONLY_RISKS = [r for r in os.environ.get("HITL_SLACK_SENTENCE_ONLY_RISKS", "").split(",") if r.strip()]
# The rejection contract: a call identical to one rejected in the same conversation this many seconds
# ago is rejected again at once, without asking (0: ask every time).
HITL_REPEAT_WINDOW_SECONDS = float(os.environ.get("HITL_REPEAT_WINDOW_SECONDS", "1800"))
# Telegram (telegramlink): the bot's token turns it on; the Bot API's base URL (a local stand-in in
# the tests); with a webhook URL updates come there, else `make run` polls for them. Its outbox is
# the deliveries base's: retried and stale as below, swept every HITL_DELIVERY_SWEEP_SECONDS.
TELEGRAM_BOT_TOKEN = os.environ.get("TELEGRAM_BOT_TOKEN", "")
TELEGRAM_API_BASE_URL = os.environ.get("TELEGRAM_API_BASE_URL", "https://api.telegram.org").rstrip("/")
TELEGRAM_WEBHOOK_URL = os.environ.get("TELEGRAM_WEBHOOK_URL", "")
HITL_TELEGRAM_CODE_MINUTES = int(os.environ.get("HITL_TELEGRAM_CODE_MINUTES", "10"))
HITL_TELEGRAM_RETRIES = int(os.environ.get("HITL_TELEGRAM_RETRIES", "5"))
HITL_TELEGRAM_STALE_SECONDS = float(os.environ.get("HITL_TELEGRAM_STALE_SECONDS", "60"))
# A2A (agentlink): how long a blocking message/send waits for the task to pause or end (then it
# answers with the task still working), and how long a stream follows one.
HITL_A2A_WAIT_SECONDS = float(os.environ.get("HITL_A2A_WAIT_SECONDS", "120"))
# The longest a long poll of the JSON API holds (GET /api/approvals/{id}?wait=N): N is cut to it.
HITL_API_MAX_WAIT_SECONDS = int(os.environ.get("HITL_API_MAX_WAIT_SECONDS", "60"))
# How many of one user's long polls may wait at once, per web process: the extra ones get a 429.
HITL_LONG_POLLS_PER_USER = int(os.environ.get("HITL_LONG_POLLS_PER_USER", "20"))
HITL_A2A_STREAM_SECONDS = float(os.environ.get("HITL_A2A_STREAM_SECONDS", "3600"))
# A2A: how many hitl agents may ask one another in a row (a remote agent's `__ask` carries the count in
# the message's metadata, `hitl_hops`); one more is refused, so that agents linked in a circle stop.
HITL_A2A_MAX_HOPS = int(os.environ.get("HITL_A2A_MAX_HOPS", "3"))
# A2A's database work runs on threads of its own (never the sockets' shared thread); each API
# token may have this many calls running and streams open at once, and each user this many with
# all of their tokens together (per daphne process): the extra ones get a TOO_MANY error.
HITL_A2A_DB_THREADS = int(os.environ.get("HITL_A2A_DB_THREADS", "8"))
HITL_A2A_CALLS_PER_TOKEN = int(os.environ.get("HITL_A2A_CALLS_PER_TOKEN", "4"))
HITL_A2A_STREAMS_PER_TOKEN = int(os.environ.get("HITL_A2A_STREAMS_PER_TOKEN", "4"))
HITL_A2A_CALLS_PER_USER = int(os.environ.get("HITL_A2A_CALLS_PER_USER", "8"))
HITL_A2A_STREAMS_PER_USER = int(os.environ.get("HITL_A2A_STREAMS_PER_USER", "8"))
HITL_MAX_MESSAGE_CHARS = int(os.environ.get("HITL_MAX_MESSAGE_CHARS", "20000"))
# Links in webhook payloads, emails, chat messages and notifications point here; unset, the port
# `make run` serves on (PORT, handed on as HITL_PORT) on this machine, by name: daphne listens on
# 127.0.0.1, but passkeys need a name (WebAuthn refuses an IP address as the relying party).
HITL_BASE_URL = (os.environ.get("HITL_BASE_URL") or f"http://localhost:{os.environ.get('HITL_PORT') or 8000}").rstrip("/")
HITL_WEBHOOK_TIMEOUT = float(os.environ.get("HITL_WEBHOOK_TIMEOUT", "10"))
HITL_WEBHOOK_RETRIES = int(os.environ.get("HITL_WEBHOOK_RETRIES", "5"))
HITL_WEBHOOK_BACKOFF = float(os.environ.get("HITL_WEBHOOK_BACKOFF", "2"))
# A pending delivery untouched this long lost its task (say, with a Redis restart): beat resends it.
HITL_WEBHOOK_STALE_SECONDS = float(os.environ.get("HITL_WEBHOOK_STALE_SECONDS", "300"))
# The reference MCP git server, which `make` installs into a virtualenv of its own (the demo agent's `git` tool server).
HITL_GIT_MCP_COMMAND = os.environ.get("HITL_GIT_MCP_COMMAND", str(BASE_DIR / ".tool-venvs" / "git" / "bin" / "mcp-server-git"))
HITL_SANDBOX_ROOT = Path(os.environ.get("HITL_SANDBOX_ROOT", VAR_DIR / "sandboxes"))
# The largest file a file question takes (its card uploads it into the conversation's sandbox): a
# question's own max_bytes is capped by it, and is it when the agent gives none.
# The AI reviewer (approvals.reviewer): how long it has to answer before a person is asked, and how
# many of the conversation's last messages it reads.
HITL_REVIEWER_SECONDS = float(os.environ.get("HITL_REVIEWER_SECONDS", "30"))
HITL_REVIEWER_MESSAGES = int(os.environ.get("HITL_REVIEWER_MESSAGES", "6"))
# Undo (chat.undo): how long after it ran a call of a reversible tool may be undone.
HITL_UNDO_SECONDS = int(os.environ.get("HITL_UNDO_SECONDS", str(24 * 3600)))
HITL_MAX_UPLOAD_BYTES = int(os.environ.get("HITL_MAX_UPLOAD_BYTES", str(10 * 1024 * 1024)))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # A decision token in a URL (an email's /approve/<token>/) is masked in every line: Django names
    # a refused request's path ("Forbidden: /approve/…") on django.request and django.security.csrf.
    "filters": {"masked_tokens": {"()": "core.masking.MaskTokens"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["masked_tokens"]}},
    "loggers": {
        "django.request": {"filters": ["masked_tokens"]},
        "django.security.csrf": {"filters": ["masked_tokens"]},
        # Each app of ours logs to the console: the engine and every surface (an A2A internal error's
        # id, a Telegram poller waiting for the Bot API, a tool server's changed listing).
        **{
            app: {"handlers": ["console"], "filters": ["masked_tokens"], "level": os.environ.get("HITL_LOG_LEVEL", "INFO")}
            for app in ("chat", "approvals", "agentlink", "deliveries", "telegramlink", "toolservers", "hitl")
        },
        "LiteLLM": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}

# Slack (slacklink): off until both the bot token and the signing secret are set. SLACK_API_BASE_URL
# is the Web API's base (Slack's own; the tests point it at their stand-in).
SLACK_BOT_TOKEN = os.environ.get("SLACK_BOT_TOKEN", "")
SLACK_SIGNING_SECRET = os.environ.get("SLACK_SIGNING_SECRET", "")
SLACK_API_BASE_URL = os.environ.get("SLACK_API_BASE_URL", "https://slack.com/api/")
HITL_SLACK_CODE_MINUTES = int(os.environ.get("HITL_SLACK_CODE_MINUTES", "10"))
HITL_SLACK_RETRIES = int(os.environ.get("HITL_SLACK_RETRIES", "5"))
HITL_SLACK_STALE_SECONDS = float(os.environ.get("HITL_SLACK_STALE_SECONDS", "60"))
LOGGING["loggers"]["slacklink"] = {"handlers": ["console"], "level": os.environ.get("HITL_LOG_LEVEL", "INFO")}

# Web Push (pushlink): notifications with Approve / Reject on phones and desktops. Nothing is sent
# until a person turns notifications on in a browser (the profile page); HITL_PUSH_NOTIFICATIONS=0
# turns the channel off. VAPID keys: from here, else generated once into VAR_DIR (keep that file).
HITL_PUSH_NOTIFICATIONS = env_bool("HITL_PUSH_NOTIFICATIONS", True)
HITL_VAPID_PRIVATE_KEY = os.environ.get("HITL_VAPID_PRIVATE_KEY", "")
HITL_VAPID_PUBLIC_KEY = os.environ.get("HITL_VAPID_PUBLIC_KEY", "")
HITL_VAPID_SUBJECT = os.environ.get("HITL_VAPID_SUBJECT", "mailto:hitl@localhost")
# The push services whose endpoints a browser may give (the site POSTs there): Chrome, Firefox, Edge, Safari.
HITL_PUSH_SERVICE_HOSTS = env_list(
    "HITL_PUSH_SERVICE_HOSTS", "fcm.googleapis.com,updates.push.services.mozilla.com,.notify.windows.com,.push.apple.com"
)
# Plain http endpoints on this machine (a local stand-in for a push service): in development only.
HITL_PUSH_ALLOW_LOOPBACK = env_bool("HITL_PUSH_ALLOW_LOOPBACK", DEBUG)
HITL_PUSH_MAX_DEVICES = int(os.environ.get("HITL_PUSH_MAX_DEVICES", "20"))
HITL_PUSH_TIMEOUT = float(os.environ.get("HITL_PUSH_TIMEOUT", "10"))
HITL_PUSH_RETRIES = int(os.environ.get("HITL_PUSH_RETRIES", "5"))
HITL_PUSH_STALE_SECONDS = float(os.environ.get("HITL_PUSH_STALE_SECONDS", "60"))
LOGGING["loggers"]["pushlink"] = {"handlers": ["console"], "level": os.environ.get("HITL_LOG_LEVEL", "INFO")}

# One-click email (emaillink): HITL_EMAIL_APPROVALS=1 mails each call to those who may decide it
# (an address on their account, not opted out on the profile page); the mail's link opens a page to
# decide on. The mail server: Django's EMAIL_* settings, read here from the environment.
HITL_EMAIL_APPROVALS = env_bool("HITL_EMAIL_APPROVALS", False)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))  # a mail server that hangs costs a retry, not a worker
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "hitl@localhost")
HITL_EMAIL_RETRIES = int(os.environ.get("HITL_EMAIL_RETRIES", "5"))
HITL_EMAIL_STALE_SECONDS = float(os.environ.get("HITL_EMAIL_STALE_SECONDS", "60"))
LOGGING["loggers"]["emaillink"] = {"handlers": ["console"], "filters": ["masked_tokens"], "level": os.environ.get("HITL_LOG_LEVEL", "INFO")}

# The MCP gateway (mcpgateway): every agent at /mcp/<slug>/. A gated call waits for its decision
# until its approval expires (the agent's or tool's timeout), and never longer than this (then the
# client is told to call again: an identical call joins the same approval). The gateway's database
# work, and the tools its approved calls run, use threads of their own in each daphne; each API token
# may have this many calls in flight at once, and each user this many with all of their tokens
# together (per daphne process): the extra ones get a TOO_MANY error.
HITL_MCP_WAIT_SECONDS = float(os.environ.get("HITL_MCP_WAIT_SECONDS", "3600"))
HITL_MCP_DB_THREADS = int(os.environ.get("HITL_MCP_DB_THREADS", "8"))
HITL_MCP_CALLS_PER_TOKEN = int(os.environ.get("HITL_MCP_CALLS_PER_TOKEN", "16"))
HITL_MCP_CALLS_PER_USER = int(os.environ.get("HITL_MCP_CALLS_PER_USER", "32"))
LOGGING["loggers"]["mcpgateway"] = {"handlers": ["console"], "level": os.environ.get("HITL_LOG_LEVEL", "INFO")}

# AG-UI (aguilink): every agent at /agui/<slug>/. Its database work runs on threads of its own in each
# daphne; each user may have this many runs open at once (per daphne process).
HITL_AGUI_DB_THREADS = int(os.environ.get("HITL_AGUI_DB_THREADS", "8"))
HITL_AGUI_RUNS_PER_USER = int(os.environ.get("HITL_AGUI_RUNS_PER_USER", "4"))

# Step-up with passkeys (stepup): approving a call at or above its agent's step_up_from_risk takes the
# approver's passkey. The WebAuthn relying party: empty means the request's own host (already checked
# against ALLOWED_HOSTS) and origin, right for one site and for tests on localhost; behind a proxy or
# on several hosts, set both (e.g. HITL_WEBAUTHN_RP_ID=hitl.example.com and
# HITL_WEBAUTHN_ORIGIN=https://hitl.example.com). A challenge is good once, for this long.
HITL_WEBAUTHN_RP_ID = os.environ.get("HITL_WEBAUTHN_RP_ID", "")
HITL_WEBAUTHN_ORIGIN = os.environ.get("HITL_WEBAUTHN_ORIGIN", "")
HITL_WEBAUTHN_RP_NAME = os.environ.get("HITL_WEBAUTHN_RP_NAME", "hitl")
HITL_STEP_UP_CHALLENGE_SECONDS = int(os.environ.get("HITL_STEP_UP_CHALLENGE_SECONDS", "120"))
