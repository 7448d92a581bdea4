"""Plans a person can change, and that hold (issue 39, item 7; the Swift design's plan approval with
`canModify`): steps reworded, dropped or reordered before approving, each with the tool it calls and
its estimated duration on the card; once approved, a call of a tool that no approved step names
waits for a person whatever the rules say, its card naming the plan, until the user writes again."""
import json

import pytest

from approvals.models import Approval, Rule
from approvals.pauses import plans
from chat.models import ToolCall
from chat.scripted import SCRIPTED_REQUESTS
from tests.conftest import client_for, only_pending, say, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)

DISOBEYS = "carry out a plan to tidy the notes and every step of it"  # the model calls every step proposed
KEEPS = "carry out a plan to tidy the notes"  # the model takes the approved steps, in the approved order


@pytest.fixture
def planning(agent):
    agent.tools = [*agent.tools, "propose_plan"]
    agent.save()
    return agent


def approve_plan(api, plan: Approval, steps) -> dict:
    response = api.post(f"approvals/{plan.pk}/decision", {"decision": "approve", "steps": steps, "shown_hash": plan.shown_hash})
    assert response.status_code == 200, response.content
    return response.json()


def test_the_plan_keeps_each_steps_tool_and_estimate_and_the_card_shows_them(alice, planning):
    conversation = start(alice, planning, KEEPS)
    plan = only_pending(conversation)

    assert plan.kind == "plan"
    assert [(s["tool"], s["estimated_duration"], s["optional"]) for s in plan.plan["steps"]] == [
        ("list_directory", 30, True), ("send_email", 120, True), ("write_file", 300, False),
    ]
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Calls <code>send_email</code> · about 2 min" in page and "about 30 s" in page and "about 5 min" in page
    assert 'name="action_3"' in page and 'data-move="up"' in page and 'name="order" value="2"' in page
    assert "Once approved, a call of a tool that no kept step names waits for you, whatever the rules say." in page


def test_a_call_outside_the_approved_steps_waits_whatever_the_rules_say_and_its_card_names_the_plan(alice, planning, api_as):
    conversation = start(alice, planning, DISOBEYS)
    plan = only_pending(conversation)
    # An allow rule that would approve any send_email at once: the plan's hold beats it.
    Rule.objects.create(effect="allow", tool="send_email", scope="agent_user", agent=planning, created_by=alice)

    approve_plan(api_as(alice), plan, [1, 3])  # "Tell bob" dropped

    held = only_pending(conversation)
    assert held.tool_call.name == "send_email" and held.rule_id is None and held.decided_via == ""
    assert held.reason.startswith(
        f"Outside the approved plan “tidy the notes” (approval #{plan.pk}): none of its approved steps calls send_email, "
        "so a person decides, whatever the rules say."
    )
    assert {"step": "plan", "outcome": "outside its steps", "detail": held.reason.split(" Demo agent")[0]} in held.explanation
    assert held.rule_suggestion["may_allow"] is False
    listed = ToolCall.objects.get(message__conversation=conversation, name="list_directory")
    assert listed.status == ToolCall.Status.SUCCEEDED and not listed.is_gated  # step 1, approved: ran as the policy says
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Outside the approved plan “tidy the notes”" in page


def test_a_low_risk_call_the_policy_runs_waits_outside_the_plan_and_a_step_inside_is_gated_as_ever(alice, planning, api_as, settings):
    conversation = start(alice, planning, DISOBEYS)
    approve_plan(api_as(alice), only_pending(conversation), [3])  # only "Do it"

    held = only_pending(conversation)
    assert (held.tool_call.name, held.risk) == ("list_directory", "low")  # never gated without the plan
    assert "none of its approved steps calls list_directory" in held.reason
    reject = api_as(alice).post(f"approvals/{held.pk}/decision", {"decision": "reject", "reason": "not in the plan"})
    assert reject.status_code == 200

    emailed = only_pending(conversation)  # the model goes on: step 2, dropped, waits too
    assert emailed.tool_call.name == "send_email" and "Outside the approved plan" in emailed.reason
    api_as(alice).post(f"approvals/{emailed.pk}/decision", {"decision": "reject"})

    written = only_pending(conversation)  # step 3, approved: gated as the agent's policy gates write_file
    assert written.tool_call.name == "write_file" and "Outside the approved plan" not in written.reason
    assert {"step": "plan", "outcome": "outside its steps"} not in [{k: s[k] for k in ("step", "outcome")} for s in written.explanation]


def test_the_hold_ends_when_the_user_writes_again(alice, planning, api_as):
    conversation = start(alice, planning, DISOBEYS)
    approve_plan(api_as(alice), only_pending(conversation), [3])
    held = only_pending(conversation)
    api_as(alice).post(f"approvals/{held.pk}/decision", {"decision": "reject"})
    api_as(alice).post(f"approvals/{only_pending(conversation).pk}/decision", {"decision": "reject"})
    api_as(alice).post(f"approvals/{only_pending(conversation).pk}/decision", {"decision": "reject"})

    say(conversation, alice, "list files")

    call = ToolCall.objects.filter(message__conversation=conversation, name="list_directory").order_by("-pk").first()
    assert call.status == ToolCall.Status.SUCCEEDED and not call.is_gated


def test_steps_reworded_and_reordered_are_what_the_model_reads_and_takes(alice, planning, api_as):
    conversation = start(alice, planning, KEEPS)
    plan = only_pending(conversation)
    SCRIPTED_REQUESTS.clear()

    approve_plan(api_as(alice), plan, [{"index": 3, "action": "Write the tidy plan"}, 1])

    plan.refresh_from_db()
    assert plan.answer["approved_steps"] == [3, 1] and plan.answer["dropped_steps"] == [2] and plan.answer["modified"] is True
    assert [(s["index"], s["action"], s["tool"]) for s in plan.answer["steps"]] == [
        (3, "Write the tidy plan", "write_file"), (1, "See what is there", "list_directory"),
    ]
    told = next(m["content"] for m in SCRIPTED_REQUESTS[0]["messages"] if m["role"] == "tool")
    outcome, sentence = told.split("\n", 1)
    assert json.loads(outcome)["steps"][0] == {"index": 3, "action": "Write the tidy plan", "description": "Write plan.txt.", "tool": "write_file"}
    assert sentence.startswith("The plan was approved as the human changed it: take these steps, in this order, as they are worded: "
                               "3. Write the tidy plan; 1. See what is there. Dropped steps, not to be taken: 2.")
    first = only_pending(conversation)  # the model takes step 3 first, as reordered
    assert first.tool_call.name == "write_file"
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert "✓ Approved as changed (steps 3, 1)" in page and "Write the tidy plan" in page and "Dropped: step 2." in page


def test_the_card_form_sends_the_order_and_the_words(alice, planning):
    conversation = start(alice, planning, KEEPS)
    plan = only_pending(conversation)

    response = client_for(alice).post(
        f"/approvals/{plan.pk}/decide/",
        {"decision": "approve", "plan": "1", "shown_hash": plan.shown_hash, "steps": ["1", "3"], "order": ["3", "2", "1"],
         "action_1": "See what is there", "action_2": "Tell bob@example.com", "action_3": "Write it all down"},
        headers={"HX-Request": "true"},
    )

    assert response.status_code == 200
    plan.refresh_from_db()
    assert plan.answer["approved_steps"] == [3, 1]
    assert [s["action"] for s in plan.answer["steps"]] == ["Write it all down", "See what is there"]


@pytest.mark.parametrize("steps, refused", [
    ([1, 2], "Step 3 (Do it: tidy the notes) is required: keep it, or reject the whole plan."),
    ([{"index": 3, "action": " "}], "Step 3: a step must say what it does."),
    ([{"index": 3, "tool": "delete_all_files"}], "only a step's action and description may change, not tool"),
    ([3, 3], "A step is listed twice."),
    ([{"index": 9}], "The plan has no step 9"),
    ([{"index": "3"}], "a number, not text"),
    (["3", 1], "a number, not text"),
])
def test_a_change_the_plan_does_not_allow_is_refused_and_decides_nothing(alice, planning, api_as, steps, refused):
    conversation = start(alice, planning, KEEPS)
    plan = only_pending(conversation)

    response = api_as(alice).post(f"approvals/{plan.pk}/decision", {"decision": "approve", "steps": steps, "shown_hash": plan.shown_hash})

    assert response.status_code in (400, 422), response.content
    if response.status_code == 400:
        assert refused in response.json()["detail"]
    plan.refresh_from_db()
    assert plan.status == "pending"


def test_a_plan_whose_steps_name_no_tool_holds_nothing(alice, planning, api_as):
    conversation = start(alice, planning, "plan a tidy-up")
    plan = only_pending(conversation)
    assert not plans.names_tools(plan.plan)
    approve_plan(api_as(alice), plan, [1, 3])

    say(conversation, alice, "list files")

    assert ToolCall.objects.filter(message__conversation=conversation, name="list_directory", is_gated=False).exists()


def test_estimates_and_tools_are_checked_as_the_plan_is_asked():
    with pytest.raises(plans.InvalidPlan, match="steps.1.estimated_duration"):
        plans.normalize({"title": "t", "steps": [{"action": "a", "estimated_duration": 0}]})
    with pytest.raises(plans.InvalidPlan, match="steps.1.tool"):
        plans.normalize({"title": "t", "steps": [{"action": "a", "tool": "x" * 201}]})
    assert plans.duration_text(5400) == "about 2 h" and plans.duration_text(59) == "about 59 s"


def test_a_newer_plan_still_waiting_or_rejected_lifts_no_hold(alice, planning, api_as):
    from approvals.services import request_approval
    from chat import planned
    from chat.models import Message

    conversation = start(alice, planning, DISOBEYS)
    approved = only_pending(conversation)
    approve_plan(api_as(alice), approved, [3])
    assert planned.holding(conversation) == approved
    # The model proposes another plan (as it might, to end the hold): while it waits, and once rejected, the first holds.
    position = conversation.messages.order_by("-position").first().position + 1
    message = Message.objects.create(conversation=conversation, position=position, role=Message.Role.ASSISTANT)
    call = ToolCall.objects.create(message=message, call_id="again", name="propose_plan", status=ToolCall.Status.PENDING_APPROVAL, is_gated=True)
    newer = request_approval(
        tool_call_id=call.pk, conversation_id=conversation.pk, requested_by_id=alice.pk, reason="", risk="low", arguments_hash="x",
        kind="plan", request=plans.normalize({"title": "Anything goes", "steps": [{"action": "a", "tool": "delete_all_files"}]}),
    )
    assert planned.holding(conversation) == approved
    api_as(alice).post(f"approvals/{newer.pk}/decision", {"decision": "reject"})
    assert planned.holding(conversation) == approved


def test_a_typed_yes_that_decides_a_held_call_does_not_end_the_hold(alice, planning, api_as):
    conversation = start(alice, planning, DISOBEYS)
    approve_plan(api_as(alice), only_pending(conversation), [3])
    assert only_pending(conversation).tool_call.name == "list_directory"

    say(conversation, alice, "yes")  # a reply about the held call (here refused: the agent wrote too), no new instruction
    assert conversation.messages.filter(role="user", content="yes", in_model_context=False).exists()
    held = only_pending(conversation)
    api_as(alice).post(f"approvals/{held.pk}/decision", {"decision": "approve", "shown_hash": held.shown_hash})

    listed = ToolCall.objects.get(message__conversation=conversation, name="list_directory")
    assert listed.status == ToolCall.Status.SUCCEEDED
    emailed = only_pending(conversation)
    assert emailed.tool_call.name == "send_email" and "Outside the approved plan" in emailed.reason
