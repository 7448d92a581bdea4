"""The demo setup `make run` does: nothing alarming before Redis is up (issue 23), and the finance
route a newcomer tries quorum with (issue 25)."""
import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from approvals.models import Approval, Route
from approvals.permissions import APPROVERS_GROUP
from chat import services
from chat.models import Agent, OutboxEmail
from tests.conftest import client_for, pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # the pushes are sent on commit


def test_the_demo_setup_before_redis_is_up_logs_no_lost_push(settings, caplog):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": ["unix:///nonexistent/hitl-redis.sock"]}}
    }
    out = io.StringIO()

    call_command("setup_demo", stdout=out)
    call_command("setup_demo", stdout=out)  # again, as every `make run` does: users exist, groups re-added

    assert not [record.getMessage() for record in caplog.records if "lost" in record.getMessage()]
    assert "createsuperuser" in out.getvalue()


def test_the_demo_has_a_finance_route_on_the_ops_agents_emails_made_once(monkeypatch):
    monkeypatch.delenv("HITL_DEMO_PASSWORD", raising=False)
    out = io.StringIO()

    call_command("setup_demo", stdout=out)
    call_command("setup_demo", stdout=out)

    (route,) = Route.objects.all()
    assert (route.agent.slug, route.tool, route.min_risk, route.quorum) == ("ops", "send_email", "low", 2)
    assert (route.remind_after_seconds, route.escalate_after_seconds) == (120, 600)
    assert [g.name for g in route.approvers.all()] == ["finance"] and [g.name for g in route.escalate_to.all()] == [APPROVERS_GROUP]
    assert sorted(User.objects.filter(groups__name="finance").values_list("username", flat=True)) == ["dana", "erin"]
    for name in ("dana", "erin"):
        assert User.objects.get(username=name).check_password(name)
    assert "finance: dana / dana; erin / erin" in out.getvalue()

    Route.objects.update(deleted_at=route.created_at)  # an operator removed it: the next `make run` makes it again
    call_command("setup_demo", stdout=out)
    assert Route.objects.filter(deleted_at__isnull=True).count() == 1


def test_a_newcomer_approves_the_ops_agents_email_as_dana_then_erin_and_it_runs_once(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("HITL_DEMO_PASSWORD", raising=False)
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    call_command("setup_demo", stdout=io.StringIO())
    demo, dana, erin, approver = (User.objects.get(username=name) for name in ("demo", "dana", "erin", "approver"))
    conversation = services.start_conversation(user=demo, agent=Agent.objects.get(slug="ops"), content="email bob@example.com about lunch")
    (approval,) = pending_approvals(conversation)
    decide = f"/approvals/dashboard/{approval.pk}/decide/"
    form = {"decision": "approve", "shown_hash": approval.shown_hash}

    assert client_for(demo).post(f"/approvals/{approval.pk}/decide/", form).status_code == 403  # the owner may only veto
    assert client_for(approver).post(decide, form).status_code == 403  # not finance, and not escalated yet
    assert client_for(dana).post(decide, form).status_code == 302  # a plain form: back to the page
    assert Approval.objects.get(pk=approval.pk).status == "pending" and not OutboxEmail.objects.exists()
    assert client_for(erin).post(decide, form).status_code == 302

    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("approved", erin)
    assert sorted(approval.votes.values_list("user__username", flat=True)) == ["dana", "erin"]
    assert list(OutboxEmail.objects.values_list("to", flat=True)) == ["bob@example.com"]


def test_what_make_run_sets_up_lists_the_tool_servers_once_and_then_starts_none(settings, tmp_path, monkeypatch):
    """`manage.py prepare_run`, one process for what each `make run` sets up: the first run lists the demo
    tool servers' tools (starting each server); a warm start asks none of them again (~5 s of every start,
    before issue 37); `--refresh` does."""
    from toolservers import discovery
    from toolservers.models import ToolServer

    settings.VAR_DIR = tmp_path
    listed = []
    real_refresh = discovery.refresh
    monkeypatch.setattr(discovery, "refresh", lambda server: listed.append(server.name) or real_refresh(server))
    out = io.StringIO()

    call_command("prepare_run", stdout=out)
    assert sorted(listed) == ["git", "notes"], out.getvalue()
    assert User.objects.filter(username__in=["demo", "approver", "dana", "erin"]).count() == 4
    assert all(server.tools for server in ToolServer.objects.all())

    call_command("prepare_run", stdout=out)
    assert sorted(listed) == ["git", "notes"]  # not started again
    assert out.getvalue().count("(listed before)") == 2, out.getvalue()

    call_command("setup_demo_tool_servers", "--refresh", stdout=out)
    assert sorted(listed) == ["git", "git", "notes", "notes"]


def test_the_demo_agents_are_told_when_to_ask_a_person_and_what_to_do_after_a_no():
    call_command("setup_demo", stdout=io.StringIO())

    for slug in ("demo", "ops"):
        prompt = Agent.objects.get(slug=slug).system_prompt
        assert "ask them with ask_human instead of guessing" in prompt
        assert "propose a plan first with propose_plan" in prompt
        assert "do not ask for the same call again" in prompt
