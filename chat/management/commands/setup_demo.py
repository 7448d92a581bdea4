import os

from django.core.management.base import BaseCommand

from chat.demo import ensure_demo_agent, ensure_ops_agent, ensure_user
from hitl import live


class Command(BaseCommand):
    help = "Create the demo user and approver (password: HITL_DEMO_PASSWORD, else their names) and the demo agents."

    def handle(self, *args, **options) -> None:
        with live.pushes_off():  # `make run` sets up before Redis starts: no page is open to tell
            self._set_up()

    def _set_up(self) -> None:
        password = os.environ.get("HITL_DEMO_PASSWORD")
        for username, approver in (("demo", False), ("approver", True)):
            user = ensure_user(username, password or username, approver=approver)
            if password:  # a password given now wins over the one set before
                user.set_password(password)
                user.save()
        ensure_demo_agent()
        ensure_ops_agent()
        shown = "(HITL_DEMO_PASSWORD)" if password else None
        self.stdout.write(f"users: demo / {shown or 'demo'}; approver / {shown or 'approver'} (may decide anyone's approvals)")
        self.stdout.write("the admin (/admin/): make one with `.venv/bin/python manage.py createsuperuser`")
