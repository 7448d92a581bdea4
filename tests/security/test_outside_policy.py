"""Outside requests cannot dodge the policy (issue 27): not by a tool's name (one that asks a human, a
glob, one that hides what it is), nor by a declared risk; the agent's own tool keeps its schema,
risk and four eyes, rules apply as to its own calls, and the caller's preview is shown escaped."""
import pytest

from approvals.models import Approval, Rule
from chat.models import ToolCall
from tests.conftest import client_for
from tests.security.outside_api import ask, asked, decide, nothing_stored

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("tool", ["ask_human", "propose_plan"])
def test_a_tool_that_asks_a_human_is_never_requested_from_outside(alice, agent, api_as, tool):
    response = ask(api_as(alice), tool=tool, arguments={"question": "ok?"})

    assert response.status_code == 400 and response.json()["field"] == "tool", response.content
    assert nothing_stored()


def test_an_agents_own_tool_keeps_its_schema_its_risk_and_its_four_eyes(alice, bob, ops_agent, api_as):
    api = api_as(alice)

    bad = ask(api, agent="ops", tool="delete_file", arguments={"path": "../../etc/passwd", "extra": 1})
    body = asked(api, agent="ops", tool="delete_file", arguments={"path": "a.txt"}, risk="low")

    assert bad.status_code == 400 and bad.json()["field"] == "arguments"
    assert body["risk"] == "high" and body["status"] == "pending"
    assert decide(api, body, confirmation="a.txt").status_code == 403  # four eyes: not its requester
    assert decide(api_as(bob), body, confirmation="a.txt").json()["status"] == "approved"


def test_a_critical_tool_needs_its_confirmation_whatever_the_request_says(alice, agent, api_as):
    body = asked(api_as(alice), tool="delete_all_files", arguments={}, risk="low")

    assert body["risk"] == "critical" and body["confirmation_required"]
    assert decide(api_as(alice), body).status_code == 400
    assert Approval.objects.get(pk=body["id"]).status == Approval.Status.PENDING


@pytest.mark.parametrize(
    "tool",
    [
        "*",
        "deploy*",
        "dep[l]oy",
        "deploy?",
        "deploy\u200b",
        "\u202edeploy",
        "d\u0435ploy",  # a Cyrillic "е": looks like the agent's own tool
        "delete_file ",
        "<b>deploy</b>",
        "x" * 201,
        "deploy\u0000",
    ],
)
def test_a_tool_name_that_is_a_glob_or_hides_what_it_is_is_refused(alice, gated_deploy, api_as, tool):
    response = ask(api_as(alice), tool=tool)

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "tool"
    assert nothing_stored()


@pytest.mark.parametrize("tool", ["deploy", "git__git_commit", "github.create-issue", "Stripe/Refund:v2", "x" * 200])
def test_the_tool_names_agents_use_are_taken(alice, gated_deploy, api_as, tool):
    assert ask(api_as(alice), tool=tool).status_code == 201


def test_a_remembered_rule_of_an_outside_call_allows_that_tool_only(alice, bob, agent, api_as):
    from chat.demo import ensure_outside_agent

    ensure_outside_agent()
    body = asked(api_as(alice), agent="outside", tool="deploy", arguments={})
    remember = {"scope": "agent", "arguments": {}}

    decided = decide(api_as(bob), body, remember=remember)
    other = asked(api_as(alice), agent="outside", tool="drop_database", arguments={})

    assert decided.status_code == 200 and Rule.objects.get().tool == "deploy"
    assert other["status"] == "pending"


def test_an_allow_rule_never_approves_a_call_declared_critical_or_one_needing_four_eyes(alice, gated_deploy, api_as):
    gated_deploy.owner_max_risk = "medium"
    gated_deploy.max_auto_approve_risk = "critical"
    gated_deploy.save()
    Rule.objects.create(effect="allow", tool="*", arguments={}, scope="agent_user", agent=gated_deploy, created_by=alice)
    api = api_as(alice)

    low = asked(api, risk="low")
    high = asked(api, risk="high")
    critical = asked(api, risk="critical")

    assert (low["status"], low["decided_via"]) == ("approved", "rule")
    assert high["status"] == critical["status"] == "pending"
    assert critical["confirmation_required"]
    assert decide(api, high).status_code == 403  # four eyes: its requester may not approve it


def test_a_deny_rule_rejects_however_risky_the_request_says_it_is(alice, gated_deploy, api_as):
    Rule.objects.create(effect="deny", tool="deploy", arguments={}, scope="agent_user", agent=gated_deploy, created_by=alice)

    body = asked(api_as(alice), risk="critical")

    assert (body["status"], body["decided_via"]) == ("rejected", "rule")


def test_a_call_just_rejected_in_a_thread_is_rejected_again_at_once(alice, gated_deploy, api_as):
    api = api_as(alice)
    first = asked(api, thread="t-1")
    decide(api, first, "reject", reason="not on a Friday")

    again = asked(api, thread="t-1")

    assert (again["status"], again["decided_via"], again["rejection_reason"]) == ("rejected", "repeat", "not on a Friday")


def test_what_the_caller_previews_is_shown_escaped_and_invisible_characters_spelled_out(alice, gated_deploy, api_as):
    body = asked(api_as(alice), preview={"kind": "diff", "text": '<script>alert(1)</script>\u202e"gpj.exe'}, reason="<img src=x onerror=alert(2)>")

    page = client_for(alice).get(f"/conversations/{body['conversation']}/").content.decode()

    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "U+202E" in body["preview"]["text"] and "U+202E" in page


def test_the_callers_reason_never_hides_our_warning_of_invisible_characters_in_the_arguments(alice, gated_deploy, api_as):
    body = asked(api_as(alice), arguments={"to": "ceo@evil\u202ecom"}, reason="Routine, nothing to see")

    assert body["reason"].startswith("Routine, nothing to see") and "invisible or direction-changing" in body["reason"]
    assert body["risk"] == "high"


def test_a_preview_at_the_limit_is_taken_and_one_past_it_refused(alice, gated_deploy, api_as):
    api = api_as(alice)

    assert ask(api, preview={"kind": "text", "text": "x" * 20_000}).status_code == 201
    past = ask(api, preview={"kind": "text", "text": "x" * 20_001})

    assert past.status_code == 400 and past.json()["field"] == "preview.text"
    assert ToolCall.objects.count() == 1
