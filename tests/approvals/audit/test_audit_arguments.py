"""Issue 22, finding 8: the audit proves the arguments, and keeps the decider's comment.

`verify_audit` hashes each chained decision's stored arguments again (the requested ones on the tool
call, the edited ones on the approval) against the hashes its link covers, so arguments rewritten
behind the triggers name their approval. A comment is chained with the decision and shown with it.
"""
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from approvals import audit
from approvals.models import Approval
from approvals.pauses.questions import normalize
from approvals.services import answer, approve_edited, decide, request_approval
from chat import tools
from chat.models import ToolCall
from tests.conftest import client_for, intact, pending_approvals, start_conversation as start
from tests.security.test_audit import triggers_dropped

pytestmark = pytest.mark.django_db(transaction=True)

REQUESTED = "its requested arguments (tool_call.arguments) no longer match the arguments_hash it chains"
EDITED = "its edited arguments (edited_arguments) no longer match the edited_arguments_hash it chains"


def rewrite(sql: str, params: list) -> None:
    """Raw SQL as the tables' owner would run it, with the triggers dropped."""
    with triggers_dropped(), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def broken_link() -> str:
    with pytest.raises(CommandError) as broken:
        call_command("verify_audit", stdout=io.StringIO())
    assert broken.value.returncode == 1
    return str(broken.value)


def approved_email(alice, bob, agent, *, edited: dict | None = None, comment: str = "") -> Approval:
    """An approved send_email (approved by bob, the approver), its call run and final."""
    [approval] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))
    seen = {"user": bob, "via": "dashboard", "shown_hash": approval.shown_hash, "comment": comment}
    if edited is None:
        decide(approval.pk, approve=True, **seen)
    else:
        approve_edited(approval.pk, arguments=approval.tool_call.arguments | edited, **seen)
    approval = Approval.objects.select_related("tool_call").get(pk=approval.pk)
    assert approval.status == Approval.Status.APPROVED and approval.tool_call.status in ToolCall.FINISHED
    return approval


def test_rewriting_an_approved_emails_recipient_names_the_approval(alice, bob, agent):
    # Link 1 of each chain here is the agent's policy version (approvals.policy.versions).
    first = approved_email(alice, bob, agent)
    approval = approved_email(alice, bob, agent)
    assert intact() == "audit chain intact: 3 decisions"
    arguments = approval.tool_call.arguments | {"to": "exfil@attacker.test"}

    rewrite("UPDATE chat_toolcall SET arguments = %s WHERE id = %s", [json.dumps(arguments), approval.tool_call_id])

    assert ToolCall.objects.get(pk=approval.tool_call_id).arguments["to"] == "exfil@attacker.test"
    assert f"audit chain broken at approval #{approval.pk} (link 3): {REQUESTED}" in broken_link()
    assert audit.verify().head.position == first.chain_position  # the links before it still hold


def test_rewriting_the_edited_arguments_names_the_approval(alice, bob, agent):
    approval = approved_email(alice, bob, agent, edited={"subject": "lunch on Friday"})
    assert approval.is_edited and intact() == "audit chain intact: 2 decisions"
    arguments = approval.edited_arguments | {"to": "exfil@attacker.test"}

    rewrite("UPDATE approvals_approval SET edited_arguments = %s WHERE id = %s", [json.dumps(arguments), approval.pk])

    assert f"audit chain broken at approval #{approval.pk} (link 2): {EDITED}" in broken_link()


def test_removing_the_edit_names_the_approval(alice, bob, agent):
    approval = approved_email(alice, bob, agent, edited={"subject": "lunch on Friday"})

    rewrite("UPDATE approvals_approval SET edited_arguments = NULL WHERE id = %s", [approval.pk])

    assert f"audit chain broken at approval #{approval.pk} (link 2): {EDITED}" in broken_link()


def test_arguments_rewritten_with_their_hash_break_the_link_that_covers_the_hash(alice, bob, agent):
    approval = approved_email(alice, bob, agent)
    arguments = approval.tool_call.arguments | {"to": "exfil@attacker.test"}
    digest = audit.arguments_hash(arguments)

    rewrite("UPDATE chat_toolcall SET arguments = %s, arguments_hash = %s WHERE id = %s",
            [json.dumps(arguments), digest, approval.tool_call_id])
    rewrite("UPDATE approvals_approval SET arguments_hash = %s WHERE id = %s", [digest, approval.pk])

    assert f"audit chain broken at approval #{approval.pk} (link 2): its content no longer matches" in broken_link()


def test_a_question_a_tool_asks_covers_no_arguments_and_gets_none_later(alice, bob, agent):
    asking = approved_email(alice, bob, agent)  # a call of the turn, standing in for a tool that asks
    question = ToolCall.objects.create(
        message_id=asking.tool_call.message_id, position=1, call_id="input-1", name="send_email",
        status=ToolCall.Status.PENDING_APPROVAL, is_gated=True, asked_by_id=asking.tool_call_id,
    )
    approval = request_approval(
        tool_call_id=question.pk, conversation_id=asking.conversation_id, requested_by_id=alice.pk, reason="asks",
        risk="low", arguments_hash=question.arguments_hash, kind=Approval.Kind.QUESTION,
        request=normalize({"question": "Which subject?"}),
    )
    answer(approval.pk, user=alice, via="api", shown_hash=approval.shown_hash, value="lunch")
    assert intact() == "audit chain intact: 3 decisions"

    rewrite("UPDATE chat_toolcall SET arguments = %s WHERE id = %s", ['{"to": "exfil@attacker.test"}', question.pk])

    assert f"audit chain broken at approval #{approval.pk} (link 3): {REQUESTED}" in broken_link()


def test_the_audit_hashes_arguments_as_the_tools_do():
    for arguments in ({}, {"b": 1, "a": [1.5, None, True]}, {"to": "zoë@exämple.test", "body": "line\n\u202e"}):
        assert audit.arguments_hash(arguments) == tools.arguments_hash(arguments)


# --- The decider's comment -------------------------------------------------------------------------


def test_an_approvers_comment_is_kept_and_chained(alice, bob, agent):
    approval = approved_email(alice, bob, agent, comment="Checked with Bob: lunch is on.")
    assert approval.comment == "Checked with Bob: lunch is on."
    assert audit.content(approval)["comment"] == approval.comment
    assert intact() == "audit chain intact: 2 decisions"

    rewrite("UPDATE approvals_approval SET comment = %s WHERE id = %s", ["", approval.pk])

    assert f"audit chain broken at approval #{approval.pk} (link 2): its content no longer matches" in broken_link()


def test_a_decision_without_a_comment_hashes_as_links_did_before_comments(alice, bob, agent):
    approval = approved_email(alice, bob, agent)
    assert approval.comment == "" and "comment" not in audit.content(approval)


def test_the_comment_is_shown_escaped_in_history_on_the_card_and_in_the_api(alice, bob, agent, api_as):
    comment = "<b>fine</b> by me"
    approval = approved_email(alice, bob, agent, comment=comment)
    escaped = "&lt;b&gt;fine&lt;/b&gt; by me"

    history = client_for(bob).get("/approvals/history/")
    page = client_for(alice).get(f"/conversations/{approval.conversation_id}/")
    listed = api_as(alice).get("approvals", status="approved")

    assert history.status_code == 200 and f"Comment: <q>{escaped}</q>" in history.content.decode()
    assert page.status_code == 200 and f"Comment by bob: <q>{escaped}</q>" in page.content.decode()
    assert "<b>fine</b>" not in history.content.decode() + page.content.decode()
    assert listed.status_code == 200 and [(a["id"], a["comment"]) for a in listed.json()["items"]] == [(approval.pk, comment)]
