"""Every token has only the power it was made for (issue 36, item 2). A token made to ask (an MCP
client's, an outside agent's, an A2A client's) starts conversations, asks for approvals and reads
outcomes, and decides nothing on any surface: not what it asked, not anything its user may decide.
A person (or a token made to decide) decides what it asked."""
import io
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command

from approvals.models import Approval, Delegation, Route, Rule
from approvals.permissions import approvers_group
from approvals.deciders.routing import ASKING_TOKEN
from chat.models import ApiToken
from tests.conftest import client_for, pending_approvals
from tests.agentlink.a2a_client import rpc
from tests.aguilink.test_aguilink import interrupts, last, run

pytestmark = pytest.mark.django_db(transaction=True)

ASK = ApiToken.Scope.ASK


def asked(api) -> dict:
    response = api.post("approval-requests", {"agent": "demo", "tool": "deploy", "arguments": {"service": "web"}})
    assert response.status_code == 201, response.content
    return response.json()


def test_create_api_token_makes_a_deciding_token_by_default_and_an_asking_one_with_scope_ask(alice):
    for options, scope in (({}, "decide"), ({"scope": "ask"}, "ask"), ({"scope": "decide"}, "decide")):
        out = io.StringIO()
        call_command("create_api_token", "alice", stdout=out, **options)
        token = out.getvalue().split()[-1]  # the last word, as scripts read it
        assert ApiToken.objects.get(key_hash=ApiToken.hash_key(token)).scope == scope
        assert ApiToken.user_for(token) == alice


def test_an_asking_token_asks_and_reads_but_every_deciding_route_is_403_and_decides_nothing(alice, gated_deploy, api_as):
    api = api_as(alice, scope=ASK)
    request = asked(api)
    approval_id = request["id"]
    shown = {"shown_hash": request["shown_hash"]}

    refused = {
        "decision": api.post(f"approvals/{approval_id}/decision", {"decision": "approve", **shown}),
        "reject": api.post(f"approvals/{approval_id}/decision", {"decision": "reject", "reason": "no", **shown}),
        "decisions": api.post("approvals/decisions", {"decision": "approve", "ids": [approval_id], "shown_hashes": {str(approval_id): request["shown_hash"]}}),
        "claim": api.post(f"approvals/{approval_id}/claim"),
        "unclaim": api.delete(f"approvals/{approval_id}/claim"),
        "extend": api.post(f"approvals/{approval_id}/extend", {}),
        "approve-all": api.post(f"conversations/{request['conversation']}/approve-all", {"ids": [approval_id], "shown_hashes": {str(approval_id): request["shown_hash"]}}),
        "approve-all without ids": api.post(f"conversations/{request['conversation']}/approve-all", {}),
        "a rule that would allow it": api.post("rules", {"effect": "allow", "tool": "deploy", "scope": "agent_user", "agent": "demo"}),
    }

    assert {name: response.status_code for name, response in refused.items()} == {name: 403 for name in refused}
    assert ASKING_TOKEN in refused["decision"].json()["detail"]
    approval = Approval.objects.get(pk=approval_id)
    assert (approval.status, approval.claimed_by, approval.extended_at) == ("pending", None, None)
    assert not Rule.objects.exists()
    # What it may do: read, and see the outcome once a person decides.
    assert api.get(f"approvals/{approval_id}").json()["status"] == "pending"
    assert api.get("approvals", status="pending").status_code == 200


@pytest.mark.parametrize("scope, status", [(ASK, 403), (ApiToken.Scope.DECIDE, 201)])
def test_an_operators_asking_token_makes_no_rule_route_or_delegation_that_their_deciding_one_makes(scope, status, bob, alice, agent, api_as):
    bob.user_permissions.add(Permission.objects.get(codename="manage_route"))
    approvers_group()  # a transactional test before may have emptied what the data migration made
    api = api_as(User.objects.get(pk=bob.pk), scope=scope)

    made = {
        "rule": api.post("rules", {"effect": "allow", "tool": "deploy", "scope": "agent", "agent": "demo"}),
        "route": api.post("routes", {"agent": "demo", "tool": "deploy", "approvers": ["Approvers"]}),
        "delegation": api.post("delegations", {"to": "alice", "starts_at": "2026-01-01T00:00:00Z", "ends_at": "2099-01-01T00:00:00Z"}),
    }

    assert {name: response.status_code for name, response in made.items()} == dict.fromkeys(made, status), {n: r.content for n, r in made.items()}
    assert (Rule.objects.count(), Route.objects.count(), Delegation.objects.count()) == ((0, 0, 0) if status == 403 else (1, 1, 1))


def test_what_an_asking_token_asked_a_person_decides_and_the_token_reads_the_outcome(alice, bob, gated_deploy, api_as):
    asking = api_as(alice, scope=ASK)
    request = asked(asking)

    by_session = client_for(alice).post(
        f"/api/approvals/{request['id']}/decision",
        json.dumps({"decision": "approve", "shown_hash": request["shown_hash"]}), content_type="application/json",
    )
    assert by_session.status_code == 200, by_session.content
    assert asking.get(f"approvals/{request['id']}").json()["status"] == "approved"

    other = asked(asking)  # a token its user made to decide decides too (as the person would)
    deciding = api_as(alice).post(f"approvals/{other['id']}/decision", {"decision": "reject", "reason": "not now", "shown_hash": other["shown_hash"]})
    assert deciding.status_code == 200 and deciding.json()["status"] == "rejected"


def test_a_typed_yes_through_an_asking_token_decides_nothing_and_says_why(alice, agent, api_as):
    api = api_as(alice, scope=ASK)
    started = api.post("conversations", {"agent": "demo", "message": "write hello to a.txt"})
    assert started.status_code == 201, started.content
    conversation = started.json()["id"]
    [approval] = pending_approvals(conversation)

    reply = api.post(f"conversations/{conversation}/messages", {"content": "yes", "shown_hashes": {str(approval.pk): approval.shown_hash}})

    assert reply.status_code in (200, 201, 202), reply.content
    approval.refresh_from_db()
    assert approval.status == "pending"
    notices = [m["content"] for m in api.get(f"conversations/{conversation}").json()["messages"] if m["role"] == "system"]
    assert any(ASKING_TOKEN in notice and "Nothing was decided" in notice for notice in notices), notices


def test_an_a2a_client_with_an_asking_token_cannot_decide_the_task_it_started(alice, agent):
    token = ApiToken.issue(alice, scope=ASK)
    start = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "write hello to a.txt"}]}}
    task = rpc(token, "SendMessage", start)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

    approve = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": task["id"], "parts": [{"data": {"decision_type": "approve"}}]}}
    refusal = rpc(token, "SendMessage", approve)

    assert refusal["error"]["code"] == -32602, refusal
    assert ASKING_TOKEN in refusal["error"]["message"] and "Nothing was decided" in refusal["error"]["message"]
    assert list(Approval.objects.values_list("status", flat=True)) == ["pending"]


def test_an_agui_client_with_an_asking_token_cannot_resume_its_interrupt_with_approve(alice, agent):
    token = ApiToken.issue(alice, scope=ASK)
    [interrupt] = interrupts(run(token, text="write hello to a.txt"))

    events = run(token, resume=[{"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": "approve"}}])

    assert last(events)["type"] == "RUN_ERROR" and last(events)["code"] == "not_allowed", last(events)
    assert ASKING_TOKEN in last(events)["message"]
    assert Approval.objects.get(pk=interrupt["id"]).status == "pending"


def test_the_admin_lists_each_tokens_scope(alice, admin_client):
    ApiToken.issue(alice, scope=ASK)
    ApiToken.issue(alice)

    page = admin_client.get("/admin/chat/apitoken/").content.decode()

    assert "ask: ask and read outcomes, never decide" in page and "decide: ask, read and decide, as its user" in page
