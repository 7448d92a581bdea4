import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from chat.demo import ensure_demo_agent


class Command(BaseCommand):
    help = "Create the demo user (password from HITL_DEMO_PASSWORD, default 'demo') and the demo agent."

    def handle(self, *args, **options) -> None:
        password = os.environ.get("HITL_DEMO_PASSWORD", "demo")
        user, created = get_user_model().objects.get_or_create(username="demo")
        if created or os.environ.get("HITL_DEMO_PASSWORD"):
            user.set_password(password)
            user.save()
        ensure_demo_agent()
        self.stdout.write(f"demo user: demo / {'(HITL_DEMO_PASSWORD)' if os.environ.get('HITL_DEMO_PASSWORD') else 'demo'}")
