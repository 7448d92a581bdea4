"""Ask rules (issue 28): a third effect that makes a human decide, even a call the policy would run;
applied deny → ask → allow on every path (the loop, approval requests, the MCP gateway, edits); the
agent's always-ask patterns; uses taken as for allow and deny. Asserted on stored state."""
import pytest
from django.urls import reverse

from approvals import audit
from approvals.policy import rules
from approvals.models import Approval, Rule
from approvals.services import approve_edited, decide
from chat.models import Conversation, ToolCall
from mcpgateway import calls as gateway
from tests.conftest import client_for, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def rule(user, **fields) -> Rule:
    defaults = {"effect": "ask", "tool": "read_file", "arguments": {"path": "secrets/*"}, "scope": Rule.Scope.GLOBAL, "created_by": user}
    return Rule.objects.create(**(defaults | fields))


def the_call(conversation) -> ToolCall:
    return ToolCall.objects.select_related("approval").get(message__conversation=conversation)


# --- The loop ----------------------------------------------------------------------------------


def test_an_ask_rule_makes_a_call_the_policy_runs_wait_for_a_human_naming_the_rule(alice, agent):
    ask = rule(alice)

    conversation = start_conversation(alice, agent, "read secrets/key.txt")

    call = the_call(conversation)
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert (call.status, call.is_gated) == (ToolCall.Status.PENDING_APPROVAL, True)
    assert (call.approval.status, call.approval.rule_id) == (Approval.Status.PENDING, ask.pk)
    assert f"Asked because of rule #{ask.pk}" in call.approval.reason
    ask.refresh_from_db()
    assert ask.uses == 1


def test_a_call_an_ask_rule_does_not_match_runs_at_once_with_no_approval(alice, agent):
    rule(alice)

    conversation = start_conversation(alice, agent, "read notes.txt")

    call = the_call(conversation)
    assert conversation.status == Conversation.Status.IDLE
    assert call.is_gated is False and not Approval.objects.exists()


def test_an_asked_call_runs_once_approved_and_not_before(alice, agent, settings):
    rule(alice)
    conversation = start_conversation(alice, agent, "read secrets/key.txt")
    folder = settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "secrets"
    folder.mkdir(parents=True)
    (folder / "key.txt").write_text("s3cret")
    call = the_call(conversation)
    assert call.result == ""

    decide(call.approval.pk, user=alice, approve=True, via="api", shown_hash=call.approval.shown_hash)

    call.refresh_from_db()
    assert (call.status, call.result) == (ToolCall.Status.SUCCEEDED, "s3cret")
    assert audit.verify().is_intact


def test_a_human_rejection_of_an_asked_call_reads_as_a_humans(alice, agent):
    rule(alice)
    conversation = start_conversation(alice, agent, "read secrets/key.txt")
    call = the_call(conversation)

    decide(call.approval.pk, user=alice, approve=False, via="api", shown_hash=call.approval.shown_hash, reason="no")

    call.refresh_from_db()
    assert call.status == ToolCall.Status.REJECTED and call.result == "Rejected by alice: no"
    html = client_for(alice).get(reverse("chat:conversation", args=[conversation.pk])).content.decode()
    assert "Rejected by alice" in html and "Allowed by rule" not in html


def test_deny_beats_ask_on_a_call_the_policy_runs(alice, agent):
    rule(alice)
    deny = rule(alice, effect="deny", arguments={"path": "secrets/*"})

    conversation = start_conversation(alice, agent, "read secrets/key.txt")

    call = the_call(conversation)
    assert (call.status, call.approval.status, call.approval.decided_via, call.approval.rule_id) == (
        ToolCall.Status.REJECTED, Approval.Status.REJECTED, Approval.Via.RULE, deny.pk,
    )
    assert call.result.startswith(f"Denied by rule #{deny.pk}")


def test_a_deny_rule_alone_now_holds_a_call_the_policy_runs_too(alice, agent):
    deny = rule(alice, effect="deny")

    call = the_call(start_conversation(alice, agent, "read secrets/key.txt"))

    assert (call.status, call.approval.rule_id) == (ToolCall.Status.REJECTED, deny.pk)


def test_ask_beats_allow_on_a_gated_call(alice, agent):
    allow = rule(alice, effect="allow", tool="write_file", arguments={})
    ask = rule(alice, tool="write_file", arguments={"path": "secrets/*"})

    asked = the_call(start_conversation(alice, agent, "write hi to secrets/a.txt"))
    allowed = the_call(start_conversation(alice, agent, "write hi to notes.txt"))

    assert (asked.approval.status, asked.approval.rule_id) == (Approval.Status.PENDING, ask.pk)
    assert (allowed.approval.status, allowed.approval.rule_id) == (Approval.Status.APPROVED, allow.pk)
    allow.refresh_from_db()
    assert allow.uses == 1  # the asked call took no use of the allow rule


def test_an_ask_rule_used_up_lets_the_call_run_as_the_policy_says(alice, agent):
    ask = rule(alice, max_uses=1)

    first = start_conversation(alice, agent, "read secrets/a.txt")
    second = start_conversation(alice, agent, "read secrets/b.txt")

    assert first.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert second.status == Conversation.Status.IDLE and the_call(second).is_gated is False
    ask.refresh_from_db()
    assert ask.uses == 1


def test_a_disabled_or_expired_ask_rule_holds_nothing(alice, agent):
    from datetime import timedelta

    from django.utils import timezone

    rule(alice, enabled=False)
    rule(alice, expires_at=timezone.now() - timedelta(minutes=1))

    assert start_conversation(alice, agent, "read secrets/a.txt").status == Conversation.Status.IDLE


# --- The agent's always-ask patterns -----------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "fits"),
    [
        ("rm -rf *", "rm -rf /", True),
        ("rm -rf *", "cd /tmp && rm -rf build", True),
        ("sudo *", "echo x; sudo reboot", True),
        ("sudo *", "pseudo code", False),
        ("curl * | sh", "curl https://get.example | sh", True),
        ("curl * | sh", "set -e; curl https://x | sh -s -- --yes", True),
        ("curl * | sh", "curl https://x -o file", False),
        ("sudo *", "SUDO reboot", True),  # in doubt an ask holds
        ("rm -rf *", "echo hello", False),
    ],
)
def test_always_ask_patterns_fit_a_command_anywhere_it_starts(pattern, text, fits):
    assert rules.pattern_fits(pattern, text) is fits


def test_an_always_ask_pattern_holds_a_call_the_policy_runs(alice, agent):
    agent.always_ask = {"read_file": ["secrets/*"]}
    agent.save()

    conversation = start_conversation(alice, agent, "read secrets/key.txt")

    call = the_call(conversation)
    assert (call.status, call.approval.status, call.approval.rule_id) == (ToolCall.Status.PENDING_APPROVAL, Approval.Status.PENDING, None)
    assert "always asks for read_file when path fits `secrets/*`" in call.approval.reason
    assert start_conversation(alice, agent, "read notes.txt").status == Conversation.Status.IDLE


def test_an_always_ask_pattern_beats_an_allow_rule(alice, agent):
    agent.always_ask = {"write_*": ["*sudo *"]}
    agent.save()
    rule(alice, effect="allow", tool="write_file", arguments={})

    asked = the_call(start_conversation(alice, agent, "write sudo reboot to a.txt"))
    allowed = the_call(start_conversation(alice, agent, "write hi to a.txt"))

    assert asked.approval.status == Approval.Status.PENDING
    assert allowed.approval.status == Approval.Status.APPROVED


def test_the_agent_admin_refuses_always_ask_of_the_wrong_shape(alice, agent):
    from chat.admin import AgentForm

    data = {field: value for field, value in AgentForm(instance=agent).initial.items() if value is not None}
    for bad in ('["sudo *"]', '{"run_command": "sudo *"}', '{"run_command": [""]}', '{"run_command": [3]}'):
        form = AgentForm(data | {"always_ask": bad}, instance=agent)
        assert not form.is_valid() and "always_ask" in form.errors, bad
    form = AgentForm(data | {"always_ask": '{"run_command": ["sudo *", "rm -rf *"]}'}, instance=agent)
    form.is_valid()
    assert "always_ask" not in form.errors


# --- Approval requests from outside (the JSON API) ---------------------------------------------


def ask_outside(api, **fields):
    body = {"agent": "demo", "tool": "read_dashboard", "arguments": {"panel": "billing"}} | fields
    return api.post("approval-requests", body)


def test_an_outside_request_the_policy_would_approve_waits_for_an_ask_rule(alice, agent, api_as):
    ask = rule(alice, tool="read_dashboard", arguments={"panel": "billing"})

    body = ask_outside(api_as(alice), reason="for the report").json()
    other = ask_outside(api_as(alice), arguments={"panel": "uptime"}).json()

    assert (body["status"], body["rule_id"]) == ("pending", ask.pk)
    stored = Approval.objects.get(pk=body["id"])
    assert stored.reason.startswith("for the report") and f"rule #{ask.pk}" in stored.reason
    assert (other["status"], other["decided_via"]) == ("approved", "policy")


def test_deny_beats_ask_on_an_outside_request(alice, agent, api_as):
    rule(alice, tool="read_dashboard", arguments={})
    deny = rule(alice, effect="deny", tool="read_dashboard", arguments={})

    body = ask_outside(api_as(alice)).json()

    assert (body["status"], body["decided_via"], body["rule_id"]) == ("rejected", "rule", deny.pk)


def test_ask_beats_allow_on_a_gated_outside_request(alice, agent, api_as):
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.save()
    rule(alice, effect="allow", tool="deploy", arguments={})
    ask = rule(alice, tool="deploy", arguments={"service": "db"})

    asked = ask_outside(api_as(alice), tool="deploy", arguments={"service": "db"}).json()
    allowed = ask_outside(api_as(alice), tool="deploy", arguments={"service": "web"}).json()

    assert (asked["status"], asked["rule_id"]) == ("pending", ask.pk)
    assert (allowed["status"], allowed["decided_via"]) == ("approved", "rule")


# --- The MCP gateway (its unit path: calls.ask, then settle) -----------------------------------


def test_an_mcp_call_that_would_run_waits_for_an_ask_rule_then_runs_once_approved(alice, agent):
    ask = rule(alice, tool="calculator", arguments={})

    asked = gateway.ask(alice, agent, name="calculator", arguments={"expression": "6 * 7"}, thread="")
    reading = gateway.settle(asked.call_id)

    call = ToolCall.objects.select_related("approval").get(pk=asked.call_id)
    assert reading.result is None and (call.status, call.approval.rule_id) == (ToolCall.Status.PENDING_APPROVAL, ask.pk)
    decide(call.approval.pk, user=alice, approve=True, via="api", shown_hash=call.approval.shown_hash)
    reading = gateway.settle(asked.call_id)
    call.refresh_from_db()
    assert call.status == ToolCall.Status.SUCCEEDED and call.result == "6 * 7 = 42"


def test_deny_beats_ask_on_an_mcp_call(alice, agent):
    rule(alice, tool="calculator", arguments={})
    rule(alice, effect="deny", tool="calculator", arguments={})

    asked = gateway.ask(alice, agent, name="calculator", arguments={"expression": "1 + 1"}, thread="")

    call = ToolCall.objects.select_related("approval").get(pk=asked.call_id)
    assert (call.status, call.approval.decided_via) == (ToolCall.Status.REJECTED, Approval.Via.RULE)


# --- Edits ---------------------------------------------------------------------------------------


def test_an_edit_an_ask_rule_matches_is_stored_and_waits_for_a_human(alice, agent):
    ask = rule(alice, tool="write_file", arguments={"path": "secrets/*"})
    call = the_call(start_conversation(alice, agent, "write hi to a.txt"))
    approval = call.approval

    edited = approve_edited(
        approval.pk, user=alice, arguments={"path": "secrets/a.txt", "content": "hi"}, via="api", shown_hash=approval.shown_hash
    )

    approval.refresh_from_db()
    assert edited.status == Approval.Status.PENDING and approval.status == Approval.Status.PENDING
    assert approval.edited_arguments == {"path": "secrets/a.txt", "content": "hi"} and approval.rule_id == ask.pk
    # A human sees the edit and decides it.
    decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_by == alice


def test_an_edit_no_ask_rule_matches_is_approved_by_its_editor(alice, agent):
    rule(alice, tool="write_file", arguments={"path": "secrets/*"})
    approval = the_call(start_conversation(alice, agent, "write hi to a.txt")).approval

    edited = approve_edited(approval.pk, user=alice, arguments={"path": "b.txt", "content": "hi"}, via="api", shown_hash=approval.shown_hash)

    assert edited.status == Approval.Status.APPROVED and edited.rule_id is None


def test_an_ask_beats_an_allow_rule_on_a_stricter_edit(alice, agent):
    agent.always_ask = {"write_file": ["*sudo*"]}
    agent.save()
    rule(alice, effect="allow", tool="write_file", arguments={})
    approval = the_call(start_conversation(alice, agent, "write hi to a.txt")).approval
    assert approval.status == Approval.Status.APPROVED  # allowed: nothing to edit

    approval = the_call(start_conversation(alice, agent, "write sudo x to a.txt")).approval
    edited = approve_edited(approval.pk, user=alice, arguments={"path": "a.txt", "content": "sudo y"}, via="api", shown_hash=approval.shown_hash)

    assert edited.status == Approval.Status.PENDING


# --- The rules API and the card ----------------------------------------------------------------


def test_the_rules_api_makes_ask_rules_and_refuses_other_effects(alice, agent, api_as):
    api = api_as(alice)

    made = api.post("rules", {"effect": "ask", "tool": "read_file", "arguments": {"path": "secrets/*"}, "scope": "agent_user", "agent": "demo"})
    wrong = api.post("rules", {"effect": "maybe", "tool": "read_file", "scope": "agent_user", "agent": "demo"})

    assert made.status_code == 201 and made.json()["effect"] == "ask"
    assert Rule.objects.get(pk=made.json()["id"]).effect == Rule.Effect.ASK
    assert wrong.status_code in (400, 422) and Rule.objects.count() == 1
    assert start_conversation(alice, agent, "read secrets/x.txt").status == Conversation.Status.WAITING_FOR_APPROVAL


def test_the_card_says_which_rule_asked(alice, agent):
    ask = rule(alice, note="secrets need a look")
    conversation = start_conversation(alice, agent, "read secrets/key.txt")

    html = client_for(alice).get(reverse("chat:conversation", args=[conversation.pk])).content.decode()

    assert f"Asked because of rule #{ask.pk}: secrets need a look" in html
    assert "Why?" in html


# --- As an outsider would try it ---------------------------------------------------------------


def test_another_users_own_ask_rule_never_holds_my_calls(alice, mallory, agent, api_as):
    made = api_as(mallory).post("rules", {"effect": "ask", "tool": "*", "scope": "agent_user", "agent": "demo"})
    assert made.status_code == 201

    assert start_conversation(alice, agent, "read secrets/key.txt").status == Conversation.Status.IDLE
    assert Rule.objects.get(pk=made.json()["id"]).uses == 0


@pytest.mark.parametrize("scope", ["agent", "global"])
def test_only_approvers_make_agent_wide_or_global_ask_rules(alice, mallory, agent, api_as, scope):
    body = {"effect": "ask", "tool": "*", "scope": scope} | ({"agent": "demo"} if scope == "agent" else {})

    response = api_as(mallory).post("rules", body)

    assert response.status_code == 403 and not Rule.objects.exists()


@pytest.mark.parametrize("effect", ["ASK", "Ask", "asks", "", None, 1, ["ask"]])
def test_an_effect_that_is_not_exactly_ask_allow_or_deny_is_refused(alice, agent, api_as, effect):
    response = api_as(alice).post("rules", {"effect": effect, "tool": "read_file", "scope": "agent_user", "agent": "demo"})

    assert response.status_code in (400, 422) and not Rule.objects.exists()


def test_a_pattern_hidden_at_the_end_of_a_huge_argument_is_still_found(alice, agent):
    text = "a " * 40_000 + "; rm -rf /"  # many word starts: each fixed piece is still looked for once
    held = rules.always_asked(rules.Call("write_file", {"path": "x", "content": text}, "medium", False, always_ask=("curl * | sh", "*rm -rf *")))
    assert [asked.pattern for asked in held] == ["*rm -rf *"]


def test_a_malformed_always_ask_setting_holds_nothing_and_breaks_nothing(alice, agent):
    for malformed in (["sudo *"], {"read_file": "secrets/*"}, {"read_file": [3, None, ""]}, "x"):
        Agent = type(agent)
        Agent.objects.filter(pk=agent.pk).update(always_ask=malformed)
        agent.refresh_from_db()
        assert start_conversation(alice, agent, "read secrets/key.txt").status == Conversation.Status.IDLE, malformed


def test_no_allow_rule_approves_a_call_that_needs_the_approvers_passkey(alice, agent):
    """An allow rule would approve without the step-up a human must give (max auto-approve high)."""
    from approvals.policy import rules as rules_

    call = rules_.Call("delete_file", {"path": "a.txt"}, "high", False, max_auto_approve_risk="high", step_up_from_risk="high")

    assert rules_.barrier(call) == rules_.STEP_UP
    assert rules_.may_auto_approve(rules_.Call("delete_file", {"path": "a.txt"}, "high", False, max_auto_approve_risk="high"))
