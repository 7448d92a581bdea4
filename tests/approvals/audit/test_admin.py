"""The audit admin: decisions are visible, searchable, exportable, and never editable."""
import csv
import io
import re
from datetime import datetime, timedelta, timezone as dt_timezone
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from approvals.deciders import delegations, routemaking
from approvals.models import Approval, Delegation, Route
from approvals.permissions import APPROVERS_GROUP, approvers_group
from approvals.services import decide
from chat import services
from tests.conftest import finance_group, pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def auditor(db):
    root = User.objects.create_superuser("root", password="root-password")
    client = Client()
    client.force_login(root)  # django-axes guards password logins, which need a request
    return client


@pytest.fixture
def decided(alice, agent):
    conversation = services.start_conversation(user=alice, agent=agent, content="delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    decide(first.pk, user=alice, approve=False, via="chat", reason="keep a", shown_hash="")
    return first


def test_approvals_are_listed_filtered_and_searchable(auditor, decided):
    assert auditor.get("/admin/approvals/approval/").status_code == 200
    filtered = auditor.get("/admin/approvals/approval/?status__exact=rejected&decided_via__exact=chat").content.decode()
    assert "1 approval" in filtered or "1 result" in filtered
    assert "keep" not in auditor.get("/admin/approvals/approval/?q=nothing-like-this").content.decode()


def test_nobody_may_change_add_or_delete_an_approval_in_the_admin(auditor, decided):
    change = auditor.post(f"/admin/approvals/approval/{decided.pk}/change/", {"status": "approved"})
    delete = auditor.post(f"/admin/approvals/approval/{decided.pk}/delete/", {"post": "yes"})
    add = auditor.get("/admin/approvals/approval/add/")

    assert (change.status_code, delete.status_code, add.status_code) == (403, 403, 403)
    decided.refresh_from_db()
    assert (decided.status, decided.rejection_reason) == ("rejected", "keep a")
    assert auditor.get(f"/admin/approvals/approval/{decided.pk}/change/").status_code == 200  # view only


def test_conversations_show_their_messages_and_tool_calls(auditor, decided):
    page = auditor.get(f"/admin/chat/conversation/{decided.conversation_id}/change/").content.decode()
    assert "delete a.txt and b.txt" in page and "rejected by alice via chat" in page


def test_decisions_export_as_csv(auditor, decided):
    response = auditor.post(
        "/admin/approvals/approval/", {"action": "export_csv", "_selected_action": [a.pk for a in Approval.objects.all()]}
    )

    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 2
    rejected = next(r for r in rows if r["id"] == str(decided.pk))
    assert (rejected["status"], rejected["decided_by"], rejected["decided_via"], rejected["rejection_reason"]) == ("rejected", "alice", "chat", "keep a")


# --- Routes, delegations and votes (issue 25) ---------------------------------------------------------


@pytest.fixture
def finance(db):
    group, _ = finance_group()
    return group


def route_form(agent, *groups, **fields) -> dict:
    return {
        "agent": agent.pk, "tool": "send_email", "min_risk": "low", "approvers": [group.pk for group in groups],
        "quorum": 2, "remind_after_seconds": "", "escalate_after_seconds": "", "escalate_to": [],
    } | fields


def test_routes_are_listed_with_their_groups_and_filtered_by_agent(auditor, finance, ops_agent, agent):
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2, remind_after_seconds=120)
    routemaking.create_route(created_by=None, agent="demo", tool="delete_file", approvers=["finance"])

    page = auditor.get("/admin/approvals/route/").content.decode()
    ops_only = auditor.get(f"/admin/approvals/route/?agent__id__exact={ops_agent.pk}&state=in_force").content.decode()

    assert "send_email" in page and "delete_file" in page and "finance" in page and "120 s, never" in page
    assert "send_email" in ops_only and "delete_file" not in ops_only
    assert 'class="selectfilter' in auditor.get("/admin/approvals/route/add/").content.decode()


def test_a_route_added_in_the_admin_is_checked_as_the_api_checks_it(auditor, finance, ops_agent):
    refused = auditor.post("/admin/approvals/route/add/", route_form(ops_agent, finance, escalate_after_seconds=600))
    assert refused.status_code == 200 and "needs `escalate_to` groups" in refused.content.decode()
    assert not Route.objects.exists()

    approvers = approvers_group()
    made = auditor.post("/admin/approvals/route/add/", route_form(ops_agent, finance, escalate_after_seconds=600, escalate_to=[approvers.pk]))

    assert made.status_code == 302
    route = Route.objects.get()
    assert (route.agent, route.tool, route.quorum, route.escalate_after_seconds, route.created_by.username) == (ops_agent, "send_email", 2, 600, "root")
    assert [g.name for g in route.approvers.all()] == ["finance"] and [g.name for g in route.escalate_to.all()] == [APPROVERS_GROUP]


def test_a_route_is_never_changed_in_the_admin(auditor, finance, ops_agent):
    route = routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)

    response = auditor.post(f"/admin/approvals/route/{route.pk}/change/", route_form(ops_agent, finance, quorum=1))

    assert response.status_code == 403
    assert Route.objects.get(pk=route.pk).quorum == 2
    assert auditor.get(f"/admin/approvals/route/{route.pk}/change/").status_code == 200  # view only


def test_deleting_a_route_in_the_admin_marks_it_removed_and_what_it_routed_keeps_it(auditor, finance, alice, ops_agent):
    route = routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)
    approval = pending_approvals(services.start_conversation(user=alice, agent=ops_agent, content="email bob@example.com about lunch"))[0]
    assert approval.route == route

    confirm = auditor.get(f"/admin/approvals/route/{route.pk}/delete/")
    deleted = auditor.post(f"/admin/approvals/route/{route.pk}/delete/", {"post": "yes"})

    assert confirm.status_code == 200 and "protected" not in confirm.content.decode().lower()
    assert deleted.status_code == 302
    route.refresh_from_db()
    assert route.deleted_at is not None
    assert Approval.objects.get(pk=approval.pk).route_id == route.pk
    assert "send_email" in auditor.get("/admin/approvals/route/?state=removed").content.decode()
    assert "send_email" not in auditor.get("/admin/approvals/route/?state=in_force").content.decode()
    assert auditor.post(f"/admin/approvals/route/{route.pk}/delete/", {"post": "yes"}).status_code == 403  # removed once


def test_the_delete_action_marks_the_selected_routes_removed(auditor, finance, ops_agent):
    routes = [routemaking.create_route(created_by=None, agent="ops", tool=tool, approvers=["finance"]) for tool in ("send_email", "delete_file")]

    response = auditor.post("/admin/approvals/route/", {"action": "delete_selected", "_selected_action": [r.pk for r in routes], "post": "yes"})

    assert response.status_code == 302
    assert Route.objects.count() == 2 and not Route.objects.filter(deleted_at__isnull=True).exists()


def test_routes_in_the_admin_need_the_route_permission(finance, ops_agent):
    staff = User.objects.create_user("sam", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get("/admin/approvals/route/").status_code == 403
    assert client.post("/admin/approvals/route/add/", route_form(ops_agent, finance)).status_code == 403

    staff.user_permissions.add(Permission.objects.get(codename="manage_route"))

    assert client.get("/admin/approvals/route/").status_code == 200
    assert client.post("/admin/approvals/route/add/", route_form(ops_agent, finance)).status_code == 302
    assert Route.objects.get().created_by == staff


def test_delegations_are_listed_and_never_added_changed_or_deleted_in_the_admin(auditor, bob, carol):
    now = timezone.now()
    delegation = delegations.delegate(bob, to="carol", starts_at=now, ends_at=now + timedelta(days=1))
    window = {"delegator": bob.pk, "delegate": carol.pk, "starts_at_0": "2030-01-01", "starts_at_1": "00:00", "ends_at_0": "2030-01-02", "ends_at_1": "00:00"}

    assert "carol" in auditor.get("/admin/approvals/delegation/").content.decode()
    assert auditor.get("/admin/approvals/delegation/add/").status_code == 403
    assert auditor.post(f"/admin/approvals/delegation/{delegation.pk}/change/", window).status_code == 403
    assert auditor.post(f"/admin/approvals/delegation/{delegation.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Delegation.objects.get(pk=delegation.pk).ends_at == delegation.ends_at


def test_an_approval_shows_its_route_quorum_and_votes_read_only(auditor, finance, alice, ops_agent):
    routemaking.create_route(created_by=None, agent="ops", tool="send_email", approvers=["finance"], quorum=2)
    approval = pending_approvals(services.start_conversation(user=alice, agent=ops_agent, content="email bob@example.com about lunch"))[0]
    decide(approval.pk, user=User.objects.get(username="dana"), approve=True, via="chat", shown_hash=approval.shown_hash, comment="fine by me")

    page = auditor.get(f"/admin/approvals/approval/{approval.pk}/change/").content.decode()

    for shown in ("Route:", "Quorum:", "Escalated at:", "On behalf of:", "1 of 2 approvals: dana", "fine by me"):
        assert shown in page, shown
    assert 'name="votes-0-comment"' not in page  # the inline is read-only


def test_push_configs_are_listed_with_their_credentials_masked_and_may_only_be_deleted(auditor, alice, agent):
    from agentlink.models import PushConfig, Task

    conversation = services.start_conversation(user=alice, agent=agent, content="what is 2 + 2")
    task = Task.objects.create(conversation=conversation, position=1)
    config = PushConfig.objects.create(
        task=task, config_id="hook-1", owner=alice, url="https://hooks.example.com/a2a", token="secret-token-4242",
        authentication={"scheme": "Bearer", "credentials": "bearer-credential-9999"},
    )

    listed = auditor.get("/admin/agentlink/pushconfig/").content.decode()
    shown = auditor.get(f"/admin/agentlink/pushconfig/{config.pk}/change/").content.decode()
    assert "hooks.example.com" in listed and "••••4242" in listed and "https://hooks.example.com/a2a" in shown
    assert "Bearer (credentials set)" in shown
    assert not [page for page in (listed, shown) if "secret-token" in page or "bearer-credential" in page]
    change = auditor.post(f"/admin/agentlink/pushconfig/{config.pk}/change/", {"url": "https://evil.example.com/"})
    assert (change.status_code, auditor.get("/admin/agentlink/pushconfig/add/").status_code) == (403, 403)
    assert PushConfig.objects.get(pk=config.pk).url == "https://hooks.example.com/a2a"

    deleted = auditor.post(f"/admin/agentlink/pushconfig/{config.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not PushConfig.objects.filter(pk=config.pk).exists()



def at(minute: int, second: int):
    return datetime(2026, 12, 1, 22, minute, second, 500000, tzinfo=dt_timezone.utc)


@pytest.fixture
def timed(alice, agent):
    """Two calls requested at 22:03:55.5 and 22:05:01.5 UTC, the first decided (now)."""
    conversation = services.start_conversation(user=alice, agent=agent, content="delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    Approval.objects.filter(pk=first.pk).update(requested_at=at(3, 55))
    Approval.objects.filter(pk=second.pk).update(requested_at=at(5, 1))
    decide(first.pk, user=alice, approve=False, via="chat", reason="keep a", shown_hash="")
    return Approval.objects.get(pk=first.pk), second


def listed_order(page: str, *approvals: Approval) -> list[int]:
    found = {a.pk: page.index(f'href="/admin/approvals/approval/{a.pk}/change/') for a in approvals}
    return sorted(found, key=found.get)


def test_the_approval_list_is_newest_first_with_times_to_the_second_and_their_zone(auditor, timed):
    decided, later = timed

    page = auditor.get("/admin/approvals/approval/").content.decode()

    assert listed_order(page, decided, later) == [later.pk, decided.pk]
    row = page[page.index(f'href="/admin/approvals/approval/{decided.pk}/change/'):]
    row = row[: row.index("</tr>")]
    assert '<td class="field-exact_requested_at">2026-12-01 22:03:55 UTC</td>' in row
    assert f'<td class="field-exact_decided_at">{decided.decided_at:%Y-%m-%d %H:%M:%S} UTC</td>' in row
    assert "p.m." not in page and "a.m." not in page  # Django's own format, to the minute at best
    assert 'class="sortable column-exact_requested_at' in page  # a column still sorted by its field
    assert "/static/css/admin_times.css" in page  # a time on one line
    oldest_first = auditor.get("/admin/approvals/approval/?o=8").content.decode()  # the 8th column: requested at
    assert listed_order(oldest_first, decided, later) == [decided.pk, later.pk]


def test_an_approvals_page_shows_its_times_to_the_second_in_the_sites_zone(auditor, timed, settings):
    decided, _ = timed
    settings.TIME_ZONE = "Asia/Tokyo"  # UTC+9 all year

    page = auditor.get(f"/admin/approvals/approval/{decided.pk}/change/").content.decode()

    decided_in_tokyo = decided.decided_at.astimezone(ZoneInfo("Asia/Tokyo"))
    for label, shown in (("Requested at", "2026-12-02 07:03:55 JST"), ("Decided at", f"{decided_in_tokyo:%Y-%m-%d %H:%M:%S} JST")):
        assert re.search(rf'{label}:</label>\s*<div class="readonly">{shown}</div>', page), label
    assert re.search(r'Claimed at:</label>\s*<div class="readonly">-</div>', page)  # no time: the admin's dash
    assert "Expired by the system if still pending." in page  # a time's help text still under it
    assert "p.m." not in page and "a.m." not in page
