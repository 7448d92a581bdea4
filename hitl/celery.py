"""The Celery app; it autodiscovers each app's tasks.py."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hitl.settings")

app = Celery("hitl")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
