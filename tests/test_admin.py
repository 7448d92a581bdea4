"""The audit admin: decisions are visible, searchable, exportable, and never editable."""
import csv
import io

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.models import Approval
from approvals.services import decide
from chat import services
from tests.conftest import pending_approvals

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
