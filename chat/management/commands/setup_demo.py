import os

from django.core.management.base import BaseCommand

from chat.demo import FINANCE_GROUP, ensure_demo_agent, ensure_finance_route, ensure_ops_agent, ensure_outside_agent, ensure_user
from core import live


class Command(BaseCommand):
    help = (
        "Create the demo user, the approver and finance's dana and erin (password: HITL_DEMO_PASSWORD, else their names), "
        "the demo agents (demo, ops, and outside: the policy for approval requests from agents that run elsewhere) "
        "and the finance route (two of finance approve the ops agent's emails)."
    )

    def handle(self, *args, **options) -> None:
        with live.pushes_off():  # `make run` sets up before Redis starts: no page is open to tell
            self._set_up()

    def _set_up(self) -> None:
        password = os.environ.get("HITL_DEMO_PASSWORD")
        for username, approver, group in (("demo", False, ""), ("approver", True, ""), ("dana", False, FINANCE_GROUP), ("erin", False, FINANCE_GROUP)):
            user = ensure_user(username, password or username, approver=approver, group=group)
            if password:  # a password given now wins over the one set before
                user.set_password(password)
                user.save()
        ensure_demo_agent()
        ensure_ops_agent()
        ensure_outside_agent()
        route = ensure_finance_route()
        shown = "(HITL_DEMO_PASSWORD)" if password else None
        self.stdout.write(f"users: demo / {shown or 'demo'}; approver / {shown or 'approver'} (may decide anyone's approvals)")
        self.stdout.write(
            f"finance: dana / {shown or 'dana'}; erin / {shown or 'erin'} (both must approve the ops agent's emails: "
            f"route #{route.pk}, reminded after {route.remind_after_seconds} s, escalated to the approvers after {route.escalate_after_seconds} s)"
        )
        self.stdout.write("the admin (/admin/): make one with `.venv/bin/python manage.py createsuperuser`")
