"""The rule simulator (issue 28): what a rule, before it is saved, would have done to the last calls
of its scope, counted on a seeded history; bounded (10,000 calls, constant queries); nothing made;
simulated by exactly who may make the rule (POST /api/rules/simulate)."""
import itertools
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals.policy import simulate
from approvals.models import Approval, Route, Rule
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation

_ids = itertools.count(1)


def seed(conversation, tool="write_file", arguments=None, *, gated=True, risk="medium", approver_required=False,
         route=None, kind="action", days_ago=0, status="pending") -> tuple[ToolCall, Approval | None]:
    """One stored call of `conversation` (and its approval if gated), made `days_ago` days ago."""
    n = next(_ids)
    message = Message.objects.create(conversation=conversation, position=n, role="assistant")
    call = ToolCall.objects.create(
        message=message, call_id=f"c{n}", name=tool, arguments=arguments if arguments is not None else {"path": f"notes/{n}.txt"},
        arguments_hash=f"{n:064x}", is_gated=gated, status="pending_approval" if gated else "succeeded",
    )
    approval = None
    if gated:
        decided = {} if status == "pending" else {"decided_at": timezone.now(), "decided_via": "chat"}
        approval = Approval.objects.create(
            tool_call=call, conversation=conversation, requested_by=conversation.owner, reason="asked", risk=risk,
            arguments_hash=call.arguments_hash, approver_required=approver_required, route=route, kind=kind, status=status, **decided,
        )
    if days_ago:
        ToolCall.objects.filter(pk=call.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    return call, approval


def allow(tool="write_file", arguments=None, **fields) -> dict:
    return {"effect": "allow", "tool": tool, "arguments": arguments or {}, **fields}


@pytest.fixture
def history(alice, agent, make_conversation):
    """alice's conversation with the demo agent: one call of each kind an allow rule meets."""
    conversation = make_conversation(alice)
    route = Route.objects.create(agent=agent, tool="write_file", min_risk="high")
    calls = {
        "plain": seed(conversation, arguments={"path": "notes/a.txt"})[1],
        "critical": seed(conversation, arguments={"path": "notes/b.txt"}, risk="critical")[1],
        "four_eyes": seed(conversation, arguments={"path": "notes/c.txt"}, approver_required=True)[1],
        "routed": seed(conversation, arguments={"path": "notes/d.txt"}, route=route)[1],
        "over_max_risk": seed(conversation, arguments={"path": "notes/e.txt"}, risk="high")[1],
        "invisible": seed(conversation, arguments={"path": "notes/f\u202e.txt"})[1],
        "ungated": seed(conversation, arguments={"path": "notes/g.txt"}, gated=False)[0],
        "other_tool": seed(conversation, tool="send_email", arguments={"to": "x@y.test"})[1],
        "question": seed(conversation, tool="ask_user", arguments={"path": "notes/q.txt"}, kind="question")[1],
        "old": seed(conversation, arguments={"path": "notes/old.txt"}, days_ago=40)[1],
    }
    return conversation, calls


def conversation_rule(conversation, **fields) -> dict:
    return {"scope": "conversation", "conversation_id": str(conversation.pk), **fields}


# --- Counts -----------------------------------------------------------------------------------------


def test_an_allow_rule_counts_what_it_would_approve_and_why_it_never_could_the_rest(alice, history, api_as):
    conversation, calls = history
    answer = api_as(alice).post("rules/simulate", conversation_rule(conversation, **allow(arguments={"path": "notes/*"})))
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert set(body) == {"would_allow", "would_deny", "would_ask", "never", "samples"}
    assert (body["would_allow"], body["would_deny"], body["would_ask"]) == (1, 0, 0)
    assert body["never"] == {
        "critical": 1, "four eyes": 1, "routed": 1, "over max risk": 1, "invisible characters": 1, "not gated": 1,
    }
    # The allowed call first, then each reason's call; the question, the other tool and the old call are not replayed.
    assert body["samples"][0] == calls["plain"].pk
    assert set(body["samples"]) == {calls[k].pk for k in ("plain", "critical", "four_eyes", "routed", "over_max_risk", "invisible", "ungated")}


def test_a_deny_rule_counts_every_call_it_matches_whatever_its_risk_gated_or_not(alice, history, api_as):
    conversation, calls = history
    body = api_as(alice).post("rules/simulate", conversation_rule(conversation, effect="deny", tool="write_file")).json()
    assert (body["would_allow"], body["would_deny"], body["would_ask"]) == (0, 7, 0)
    assert body["never"] == {} and calls["ungated"].pk in body["samples"]


def test_an_ask_rule_counts_gated_and_ungated_calls_it_would_put_before_a_human(alice, history, api_as):
    conversation, calls = history
    body = api_as(alice).post("rules/simulate", conversation_rule(conversation, effect="ask", tool="write_file", arguments={"path": "notes/?.txt"})).json()
    assert (body["would_allow"], body["would_deny"], body["would_ask"]) == (0, 0, 6)  # f‮.txt is not one character
    assert body["never"] == {}
    assert calls["ungated"].pk in body["samples"]


def test_only_the_last_days_are_replayed(alice, history):
    conversation, calls = history
    rule = {**allow(), "scope": "conversation", "conversation_id": conversation.pk}
    assert simulate.simulate_for(alice, **rule).would_allow == 1
    longer = simulate.simulate_for(alice, days=60, **rule)
    assert longer.would_allow == 2 and calls["old"].pk in [sample.id for sample in longer.samples]


def test_a_rule_with_max_uses_decides_the_oldest_calls_and_is_used_up_for_the_newer(alice, make_conversation):
    conversation = make_conversation(alice)
    approvals = [seed(conversation, days_ago=5 - n)[1] for n in range(5)]  # oldest first
    result = simulate.simulate_for(alice, **allow(max_uses=2), scope="conversation", conversation_id=conversation.pk)
    assert (result.would_allow, result.never) == (2, {"used up": 3})
    assert {s.id for s in result.samples if s.outcome == "allow"} == {approvals[0].pk, approvals[1].pk}


def test_the_scope_says_whose_calls_are_replayed(alice, bob, agent, make_conversation):
    mine, theirs = make_conversation(alice), make_conversation(bob)
    seed(mine), seed(theirs)
    assert simulate.simulate_for(alice, **allow(), scope="agent_user", agent=agent.slug).would_allow == 1
    assert simulate.simulate_for(bob, **allow(), scope="agent", agent=agent.slug).would_allow == 2
    assert simulate.simulate_for(bob, **allow(), scope="global").would_allow == 2
    assert simulate.simulate_for(bob, **allow(), scope="conversation", conversation_id=theirs.pk).would_allow == 1


def test_at_most_ten_thousand_calls_newest_first_in_a_constant_number_of_queries(alice, make_conversation, settings):
    conversation = make_conversation(alice)
    first, _ = seed(conversation, arguments={"path": "old/first.txt"})  # the oldest: beyond the cap
    message = Message.objects.create(conversation=conversation, position=0, role="assistant")
    ToolCall.objects.bulk_create(
        ToolCall(message=message, call_id=f"u{n}", name="write_file", arguments={"path": f"notes/{n}.txt"},
                 arguments_hash=f"{n:064x}", is_gated=False, status="succeeded")
        for n in range(simulate.MAX_CALLS)
    )
    fields = {"effect": "ask", "tool": "write_file", "arguments": {}, "scope": "conversation", "conversation_id": conversation.pk}
    small = make_conversation(alice)
    seed(small, gated=False)
    simulate.simulate_for(alice, **{**fields, "conversation_id": small.pk})  # alice's permissions, cached as a request would
    with CaptureQueriesContext(connection) as capped:
        result = simulate.simulate_for(alice, **fields)
    assert (result.would_ask, result.replayed, result.capped) == (simulate.MAX_CALLS, simulate.MAX_CALLS, True)
    newest = ToolCall.objects.filter(message=message).order_by("-pk").values_list("pk", flat=True)[: simulate.SAMPLES_PER_OUTCOME]
    assert [sample.tool_call_id for sample in result.samples] == list(newest)
    assert first.pk not in [sample.tool_call_id for sample in result.samples]
    with CaptureQueriesContext(connection) as one:
        assert simulate.simulate_for(alice, **{**fields, "conversation_id": small.pk}).would_ask == 1
    assert len(capped) == len(one), [q["sql"] for q in capped]


def test_simulating_changes_nothing(alice, history, api_as):
    conversation, calls = history
    Rule.objects.create(effect="allow", tool="write_file", scope="conversation", conversation=conversation, created_by=alice)
    before = list(Rule.objects.values()), list(Approval.objects.values()), list(ToolCall.objects.values())
    api = api_as(alice)
    for effect in ("allow", "deny", "ask"):
        assert api.post("rules/simulate", conversation_rule(conversation, effect=effect, tool="*", max_uses=1)).status_code == 200
    assert (list(Rule.objects.values()), list(Approval.objects.values()), list(ToolCall.objects.values())) == before


@pytest.mark.django_db(transaction=True)
def test_what_it_says_an_allow_rule_would_do_is_what_the_rule_then_does(alice, agent, api_as):
    """The same matching as the live rules: the loop's own gated calls, then the rule saved."""
    asked = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(asked)
    rule = {**allow(arguments={"path": "notes/*"}), "scope": "agent_user", "agent": agent.slug}
    api = api_as(alice)
    body = api.post("rules/simulate", rule).json()
    assert (body["would_allow"], body["samples"]) == (1, [approval.pk])
    assert api.post("rules", rule).status_code == 201
    again = start_conversation(alice, agent, "write hi to notes/b.txt")
    assert Approval.objects.get(conversation=again).decided_via == Approval.Via.RULE


# --- Who may simulate what ---------------------------------------------------------------------------


def test_agent_wide_and_global_simulations_are_for_approvers_only(alice, bob, agent, api_as):
    for scope, extra in (("agent", {"agent": agent.slug}), ("global", {})):
        assert api_as(alice).post("rules/simulate", {**allow(), "scope": scope, **extra}).status_code == 403
        assert api_as(bob).post("rules/simulate", {**allow(), "scope": scope, **extra}).status_code == 200


def test_another_users_conversation_or_an_unknown_agent_is_not_found(alice, mallory, history, api_as):
    conversation, _ = history
    api = api_as(mallory)
    assert api.post("rules/simulate", conversation_rule(conversation, **allow())).status_code == 404
    assert api.post("rules/simulate", {**allow(), "scope": "agent_user", "agent": "nope"}).status_code == 404


def test_no_token_or_a_wrong_one_is_refused(history, api_as, client):
    conversation, _ = history
    body = conversation_rule(conversation, **allow())
    assert api_as(None).post("rules/simulate", body).status_code == 401
    wrong = client.post("/api/rules/simulate", body, content_type="application/json", headers={"Authorization": "Bearer hitl_nope"})
    assert wrong.status_code == 401


def test_a_browser_session_needs_its_csrf_token(alice, history):
    conversation, _ = history
    refused = client_for(alice, csrf=True).post("/api/rules/simulate", conversation_rule(conversation, **allow()), content_type="application/json")
    assert refused.status_code == 403 and not Rule.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"effect": "maybe", "tool": "x", "scope": "global"},
        {"effect": "allow", "tool": "", "scope": "agent_user", "agent": "demo"},
        {"effect": "allow", "tool": "x", "scope": "agent_user", "agent": "demo", "arguments": {"path": {"regex": "("}}},
        {"effect": "allow", "tool": "x", "scope": "agent_user", "agent": "demo", "days": 0},
        {"effect": "allow", "tool": "x", "scope": "agent_user", "agent": "demo", "days": 10**6},
        {"effect": "allow", "tool": "x", "scope": "agent_user", "agent": "demo", "days": "many"},
        {"effect": "allow", "tool": "x", "scope": "agent_user", "agent": "demo", "expires_at": "2001-01-01T00:00:00Z"},
        {"effect": "allow", "tool": "x", "scope": "conversation"},
        {"effect": "allow", "tool": "x\u0000", "scope": "agent_user", "agent": "demo"},
        {"effect": "allow", "tool": "x", "scope": "agent_user", "agent": "demo\u0000"},
        ["not", "an", "object"],
    ],
)
def test_bad_input_is_refused_and_nothing_is_made(alice, agent, api_as, body):
    refused = api_as(alice).post("rules/simulate", body)
    assert refused.status_code in (400, 404, 422), refused.content
    assert "detail" in refused.json()
    assert not Rule.objects.exists()


def test_a_bad_days_is_refused_in_words(alice, agent):
    for days in (0, -1, simulate.MAX_DAYS + 1, True, "30"):
        with pytest.raises(simulate.rulemaking.InvalidRule, match="days"):
            simulate.simulate_for(alice, **allow(), scope="agent_user", agent=agent.slug, days=days)


def test_the_rules_api_still_answers_its_own_routes_beside_simulate(alice, agent, api_as):
    api = api_as(alice)
    made = api.post("rules", {**allow(), "scope": "agent_user", "agent": agent.slug})
    assert made.status_code == 201
    assert api.patch(f"rules/{made.json()['id']}", {"enabled": False}).status_code == 200
    assert api.get("rules/simulate").status_code in (404, 405)
    assert Conversation.objects.count() == 0
