"""Why, for every call (issue 28): each approval stores its decision path as it was applied (the
gate and why, each rule of the tool and why it applied or was skipped, the route, the repeat check,
the outcome), GET /api/approvals/{id}/explain returns it, and the card and history fold it ("Why?")."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.policy import explain, rules
from approvals.models import Approval, Route, Rule
from approvals.services import approve_edited, decide
from tests.conftest import client_for, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def rule(user, **fields) -> Rule:
    defaults = {"effect": "allow", "tool": "write_file", "arguments": {}, "scope": Rule.Scope.GLOBAL, "created_by": user}
    return Rule.objects.create(**(defaults | fields))


def steps_of(conversation) -> list[dict]:
    approval = Approval.objects.filter(conversation=conversation).order_by("pk").first()
    assert approval.explanation, "an explanation is stored when the approval is made"
    return approval.explanation


def step_named(steps: list[dict], name: str) -> dict:
    return next(step for step in steps if step["step"] == name)


def rule_step(steps: list[dict], rule_: Rule) -> dict:
    return next(step for step in steps if step["step"].startswith(f"rule #{rule_.pk} "))


# --- Every skip reason ---------------------------------------------------------------------------


def test_a_critical_call_says_no_rule_approves_it(alice, agent):
    allow = rule(alice, tool="*")
    steps = steps_of(start_conversation(alice, agent, "delete all files"))
    assert rule_step(steps, allow)["outcome"] == "skipped"
    assert "critical" in rule_step(steps, allow)["detail"]
    assert step_named(steps, "risk")["outcome"] == "critical"


def test_a_four_eyes_call_says_so_at_the_gate_and_at_the_rule(alice, ops_agent):
    allow = rule(alice, tool="*")
    steps = steps_of(start_conversation(alice, ops_agent, "delete a.txt"))
    assert step_named(steps, "four eyes")["outcome"] == "required"
    assert "above the owner's limit (medium)" in step_named(steps, "four eyes")["detail"]
    assert "four eyes" in rule_step(steps, allow)["detail"]


def test_a_call_over_the_agents_max_risk_says_so(alice, agent):
    agent.max_auto_approve_risk = "low"
    agent.save()
    allow = rule(alice)
    steps = steps_of(start_conversation(alice, agent, "write hi to a.txt"))
    assert "over max risk" in rule_step(steps, allow)["detail"]


def test_invisible_characters_are_explained_at_the_gate_and_at_the_rule(alice, agent):
    allow = rule(alice)
    steps = steps_of(start_conversation(alice, agent, "write hi to a\u200b.txt"))
    assert step_named(steps, "invisible characters")["outcome"] == "found"
    assert "invisible characters" in rule_step(steps, allow)["detail"]


def test_an_expired_rule_is_named_as_expired(alice, agent):
    expired = rule(alice, expires_at=timezone.now() - timedelta(minutes=5))
    conversation = start_conversation(alice, agent, "write hi to a.txt")
    steps = steps_of(conversation)
    assert rule_step(steps, expired)["outcome"] == "skipped" and "expired at" in rule_step(steps, expired)["detail"]
    assert step_named(steps, "outcome")["outcome"] == "waits for a human"


def test_a_rule_that_expires_between_the_screening_and_its_use_is_named_as_expired(alice, agent):
    allow = rule(alice)
    call = rules.Call("write_file", {"path": "a.txt"}, "medium", False)
    screening = rules.screen([allow], call, conversation_id=None, arguments_hash="x", gated=True)
    Rule.objects.filter(pk=allow.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    applied = rules.apply(screening)

    assert applied.effect == ""
    assert "expired" in rule_step(explain.rules(screening, applied), allow)["detail"]


def test_a_used_up_rule_is_named_as_used_up(alice, agent):
    used = rule(alice, max_uses=1, uses=1)
    steps = steps_of(start_conversation(alice, agent, "write hi to a.txt"))
    assert rule_step(steps, used)["detail"] == "Matched, but used up."


def test_conditions_not_met_name_the_argument_and_the_condition(alice, agent):
    allow = rule(alice, arguments={"path": "notes/*"})
    steps = steps_of(start_conversation(alice, agent, "write hi to a.txt"))
    assert rule_step(steps, allow)["detail"].startswith("conditions not met: path does not fit `notes/*`")


def test_a_rule_that_matched_after_another_decided_says_another_rule_first(alice, agent):
    first, second = rule(alice), rule(alice)
    deny = rule(alice, effect="deny", arguments={"path": "x/*"})
    steps = steps_of(start_conversation(alice, agent, "write hi to a.txt"))
    assert rule_step(steps, first)["outcome"] == "applied"
    assert rule_step(steps, second)["detail"] == f"Matched; another rule first: rule #{first.pk} (allow)."
    assert step_named(steps, "outcome") == {"step": "outcome", "outcome": "approved", "detail": f"Approved at once by rule #{first.pk}."}
    # In the order applied: the gate, the route, deny rules, the repeat check, then allow rules.
    names = [step["step"] for step in steps]
    assert names.index("gate") < names.index("route") < names.index(rule_step(steps, deny)["step"])
    assert names.index("repeat check") < names.index(rule_step(steps, first)["step"]) < names.index("outcome")


def test_an_ask_rule_skips_the_allow_rules_after_it(alice, agent):
    allow = rule(alice)
    ask = rule(alice, effect="ask", arguments={"path": "secrets/*"})
    steps = steps_of(start_conversation(alice, agent, "write hi to secrets/a.txt"))
    assert rule_step(steps, ask)["outcome"] == "applied"
    assert rule_step(steps, allow)["detail"] == f"Matched; another rule first: rule #{ask.pk} (ask)."


def test_a_routed_call_says_its_route_and_that_no_rule_approves_it(alice, agent):
    route = Route.objects.create(agent=agent, tool="write_file", quorum=2)
    route.approvers.add(Group.objects.create(name="ops"))
    allow = rule(alice)
    steps = steps_of(start_conversation(alice, agent, "write hi to a.txt"))
    assert step_named(steps, "route")["outcome"] == f"route #{route.pk}"
    assert "routed" in rule_step(steps, allow)["detail"]


def test_the_repeat_check_explains_a_rejection_repeated(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to a.txt")
    first = Approval.objects.get(conversation=conversation)
    decide(first.pk, user=alice, approve=False, via="api", shown_hash=first.shown_hash, reason="no")
    from chat import services

    services.post_message(conversation=conversation, user=alice, content="write hi to a.txt")
    again = Approval.objects.filter(conversation=conversation).exclude(pk=first.pk).get()
    assert step_named(again.explanation, "repeat check")["outcome"] == "rejected again"


def test_an_always_ask_pattern_is_explained(alice, agent):
    agent.always_ask = {"read_file": ["secrets/*"]}
    agent.save()
    steps = steps_of(start_conversation(alice, agent, "read secrets/key.txt"))
    assert step_named(steps, "gate")["outcome"] == "runs without a human"
    assert step_named(steps, "always ask")["outcome"] == "applied"
    assert "path fits `secrets/*`" in step_named(steps, "always ask")["detail"]


def test_an_outside_request_approved_by_policy_says_so(alice, agent, api_as):
    body = api_as(alice).post("approval-requests", {"agent": "demo", "tool": "read_dashboard", "arguments": {}}).json()
    steps = Approval.objects.get(pk=body["id"]).explanation
    assert step_named(steps, "gate")["outcome"] == "runs without a human"
    assert step_named(steps, "outcome")["outcome"] == "approved" and "policy" in step_named(steps, "outcome")["detail"]


def test_an_edit_adds_its_own_path_to_the_explanation(alice, agent):
    approval = Approval.objects.get(conversation=start_conversation(alice, agent, "write hi to a.txt"))
    before = len(approval.explanation)

    approve_edited(approval.pk, user=alice, arguments={"path": "b.txt", "content": "hi"}, via="api", shown_hash=approval.shown_hash)

    approval.refresh_from_db()
    added = approval.explanation[before:]
    assert added[0] == {"step": "edit", "outcome": "by alice", "detail": added[0]["detail"]}
    assert added[-1]["outcome"] == "approved" and "alice" in added[-1]["detail"]


# --- The API ---------------------------------------------------------------------------------------


def test_the_explain_api_returns_the_steps_in_order(alice, agent, api_as):
    allow = rule(alice)
    approval = Approval.objects.get(conversation=start_conversation(alice, agent, "write hi to a.txt"))

    response = api_as(alice).get(f"approvals/{approval.pk}/explain")

    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["steps"] and body["steps"] == approval.explanation
    assert all(set(step) == {"step", "outcome", "detail"} and all(isinstance(v, str) for v in step.values()) for step in body["steps"])
    assert rule_step(body["steps"], allow)["outcome"] == "applied"


def test_the_explain_api_is_404_for_approvals_the_caller_may_not_see(alice, mallory, agent, api_as):
    approval = Approval.objects.get(conversation=start_conversation(alice, agent, "write hi to a.txt"))

    assert api_as(mallory).get(f"approvals/{approval.pk}/explain").status_code == 404
    assert api_as(alice).get("approvals/999999/explain").status_code == 404
    assert api_as(alice).get(f"approvals/{2**63}/explain").status_code in (404, 422)
    assert api_as(alice).get("approvals/abc/explain").status_code == 422
    assert Client().get(f"/api/approvals/{approval.pk}/explain").status_code == 401  # no token, no session


def test_an_approval_without_a_stored_explanation_is_summarised(alice, agent, api_as):
    approval = Approval.objects.get(conversation=start_conversation(alice, agent, "write hi to a.txt"))
    Approval.objects.filter(pk=approval.pk).update(explanation=None)  # as one made before explanations

    steps = api_as(alice).get(f"approvals/{approval.pk}/explain").json()["steps"]

    assert steps[0] == {"step": "gate", "outcome": "asks a human", "detail": approval.reason}


def test_the_explain_route_does_not_take_the_plain_approval_route(alice, agent, api_as):
    approval = Approval.objects.get(conversation=start_conversation(alice, agent, "write hi to a.txt"))
    assert api_as(alice).get(f"approvals/{approval.pk}").json()["id"] == approval.pk


# --- Pages ---------------------------------------------------------------------------------------


def test_the_card_and_history_fold_the_explanation(alice, bob, agent):
    allow = rule(alice)
    conversation = start_conversation(alice, agent, "write hi to a.txt")
    approval = Approval.objects.get(conversation=conversation)

    card = client_for(alice).get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    history = client_for(bob).get(reverse("approvals:history")).content.decode()  # an approver's page

    # A decided card's one fold holds it; history folds it on its own.
    assert '<summary>Details</summary>' in card and "Why it was asked" in card
    assert f'id="why-{approval.pk}"' in history and "<summary>Why?</summary>" in history
    for html in (card, history):
        assert f"rule #{allow.pk} (allow write_file)" in html


def test_what_a_rule_or_tool_says_is_escaped_in_the_fold(alice, agent):
    rule(alice, arguments={"path": "<script>alert(1)</script>"})
    conversation = start_conversation(alice, agent, "write hi to a.txt")

    card = client_for(alice).get(reverse("chat:conversation", args=[conversation.pk])).content.decode()

    assert "<script>alert(1)</script>" not in card and "&lt;script&gt;alert(1)&lt;/script&gt;" in card
