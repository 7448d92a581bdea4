"""The agent asks the human (issue 13): typed questions and plans, on the same pause as approvals.
What a question or plan may be and what answers it (pure), then the whole way through the loop
with the scripted model (eager Celery), the services, the typed reply and the JSON API."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import audit
from approvals.pauses import plans, questions
from approvals.models import Approval
from approvals.services import InvalidAnswer, WrongKind, answer, decide, decide_many, expire_overdue
from chat import services
from chat.models import Conversation, Message, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation
from tests.security.test_audit import triggers_dropped

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def question(**arguments) -> dict:
    return questions.normalize({"question": "Which?"} | arguments)


# --- What a question may be ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"question": "  "}, "question"),
        ({"type": "colour"}, "type"),
        ({"type": "choice", "options": ["only one"]}, "options"),
        ({"type": "choice"}, "options"),
        ({"type": "multi_choice", "options": [str(i) for i in range(21)]}, "options"),
        ({"type": "choice", "options": ["Tea", "tea"]}, "options"),
        ({"type": "choice", "options": ["tea", " "]}, "options"),
        ({"type": "number", "options": ["1", "2"]}, "options"),
        ({"type": "number", "min": 10, "max": 1}, "min"),
        ({"type": "text", "min": 1}, "min, max"),
        ({"type": "number", "min": "ten"}, "min"),
        ({"type": "number", "min": 1, "max": 5, "default": 9}, "default"),
        ({"type": "date", "default": "tomorrow"}, "default"),
        ({"type": "choice", "options": ["a", "b"], "default": "c"}, "default"),
    ],
)
def test_a_question_its_type_does_not_allow_is_refused_naming_the_field(arguments, field):
    with pytest.raises(questions.InvalidQuestion) as refused:
        question(**arguments)
    assert str(refused.value).startswith(f"{field}:")


def test_a_question_is_stored_with_every_field_and_integral_bounds_as_integers():
    assert question(type="number", min=1.0, max=10.5, default=3) == {
        "text": "Which?", "type": "number", "options": [], "min": 1, "max": 10.5, "default": 3, "required": True,
    }
    assert question(type="choice", options=[" tea ", "coffee"], required=False)["options"] == ["tea", "coffee"]


# --- What answers it ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "value", "stored"),
    [
        ({"type": "text"}, "  Notes  ", "Notes"),
        ({"type": "text", "required": False}, "", ""),
        ({"type": "choice", "options": ["tea", "coffee"]}, "coffee", "coffee"),
        ({"type": "multi_choice", "options": ["a", "b", "c"]}, ["c", "a"], ["a", "c"]),
        ({"type": "multi_choice", "options": ["a", "b"], "required": False}, [], []),
        ({"type": "number", "min": 1, "max": 10}, 10, 10),
        ({"type": "number", "min": 1, "max": 10}, 2.5, 2.5),
        ({"type": "number"}, "-3", -3),
        ({"type": "date"}, "2026-12-01", "2026-12-01"),
        ({"type": "confirm"}, False, False),
    ],
)
def test_an_answer_that_fits_its_type_is_stored_normalized(arguments, value, stored):
    assert questions.validate_answer(question(**arguments), value) == stored


@pytest.mark.parametrize(
    ("arguments", "value", "why"),
    [
        ({"type": "text"}, "   ", "An answer is required."),
        ({"type": "text"}, 5, "Answer with text."),
        ({"type": "text"}, "a\x00b", "NUL"),
        ({"type": "text"}, "x" * 5001, "longer than 5000"),
        ({"type": "choice", "options": ["tea", "coffee"]}, "beer", "Choose one of: tea, coffee."),
        ({"type": "choice", "options": ["tea", "coffee"]}, ["tea"], "Choose one of"),
        ({"type": "multi_choice", "options": ["a", "b"]}, ["a", "z"], "'z' is not an option"),
        ({"type": "multi_choice", "options": ["a", "b"]}, ["a", "a"], "chosen twice"),
        ({"type": "multi_choice", "options": ["a", "b"]}, [], "at least one"),
        ({"type": "multi_choice", "options": ["a", "b"]}, "a", "a list of options"),
        ({"type": "number", "min": 1, "max": 10}, 11, "between 1 and 10"),
        ({"type": "number", "min": 1}, 0, "of at least 1"),
        ({"type": "number", "max": 1}, 2, "of at most 1"),
        ({"type": "number"}, True, "Answer with a number."),
        ({"type": "number"}, "NaN", "Answer with a number."),
        ({"type": "number"}, "eleven", "Answer with a number."),
        ({"type": "date"}, "2026-02-30", "is not a date"),
        ({"type": "date"}, "1 December", "YYYY-MM-DD"),
        ({"type": "confirm"}, "yes", "true"),
    ],
)
def test_an_answer_that_does_not_fit_is_refused_saying_why(arguments, value, why):
    with pytest.raises(questions.InvalidAnswer) as refused:
        questions.validate_answer(question(**arguments), value)
    assert why in str(refused.value)


@pytest.mark.parametrize(
    ("arguments", "typed", "value"),
    [
        ({"type": "choice", "options": ["Tea", "Coffee"]}, "coffee", "Coffee"),
        ({"type": "choice", "options": ["Tea", "Coffee"]}, "2", "Coffee"),
        ({"type": "multi_choice", "options": ["a", "b", "c"]}, "C and a", ["c", "a"]),
        ({"type": "number"}, " 7 ", 7),
        ({"type": "number"}, "seven", "seven"),
        ({"type": "confirm"}, "Yes!", True),
        ({"type": "confirm"}, "no", False),
        ({"type": "date"}, "2026-12-01", "2026-12-01"),
    ],
)
def test_a_typed_reply_reads_as_the_value_of_its_type(arguments, typed, value):
    assert questions.from_text(question(**arguments), typed) == value


# --- Plans ---------------------------------------------------------------------------------------

PLAN = plans.normalize({"title": "Tidy up", "steps": [
    {"action": "Read the notes"}, {"action": "Email bob", "optional": True}, {"action": "Delete old files"},
]})


def test_a_plan_is_stored_with_its_steps_numbered_from_one():
    assert PLAN["steps"][1] == {"index": 2, "action": "Email bob", "description": "", "optional": True, "tool": "", "estimated_duration": None}


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"title": "", "steps": [{"action": "x"}]}, "title"),
        ({"title": "t", "steps": []}, "steps"),
        ({"title": "t", "steps": [{"action": "x"}] * 21}, "steps"),
        ({"title": "t", "steps": [{"action": " "}]}, "steps.1.action"),
    ],
)
def test_a_plan_that_does_not_hold_together_is_refused_naming_the_field(arguments, field):
    with pytest.raises(plans.InvalidPlan) as refused:
        plans.normalize(arguments)
    assert str(refused.value).startswith(f"{field}")


def test_only_optional_steps_may_be_dropped():
    assert plans.approved_steps(PLAN, [3, 1]) == [1, 3]
    for steps, why in (([1, 2], "Step 3 (Delete old files) is required"), ([1, 3, 4], "no step 4"), ([1, 1, 3], "twice"), ([True], "step numbers")):
        with pytest.raises(plans.InvalidSteps) as refused:
            plans.approved_steps(PLAN, steps)
        assert why in str(refused.value)


# --- Through the loop, with the scripted model -------------------------------------------------


def asked(alice, agent, text: str) -> tuple[Conversation, Approval]:
    conversation = start_conversation(alice, agent, text)
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    [approval] = pending_approvals(conversation)
    return conversation, approval


def last_reply(conversation) -> str:
    return conversation.messages.filter(role=Message.Role.ASSISTANT).order_by("-position").first().content


def test_a_text_question_waits_and_its_answer_is_the_calls_result(alice, agent):
    conversation, approval = asked(alice, agent, "ask me what to call the file")
    assert approval.kind == "question"
    assert approval.question == {
        "text": "what to call the file", "type": "text", "options": [], "min": None, "max": None, "default": None, "required": True,
    }
    assert approval.reason == "Demo agent asks you a question."

    answer(approval.pk, user=alice, via=Approval.Via.CHAT, value="notes.txt", shown_hash="")

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert last_reply(conversation) == "You answered: notes.txt."
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.SUCCEEDED
    assert json.loads(call.result.split("\n")[0]) == {"answer": "notes.txt"}
    assert call.result.endswith("The human answered: notes.txt.")
    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_by, approval.decided_via) == ("answered", "notes.txt", alice, "chat")


def test_an_invalid_answer_decides_nothing_and_a_valid_one_then_does(alice, agent):
    conversation, approval = asked(alice, agent, "ask me for a number between 1 and 10")
    assert (approval.question["type"], approval.question["min"], approval.question["max"]) == ("number", 1, 10)
    with pytest.raises(InvalidAnswer, match="between 1 and 10"):
        answer(approval.pk, user=alice, via=Approval.Via.API, value=11, shown_hash="")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.chain_position is None

    answer(approval.pk, user=alice, via=Approval.Via.API, value=7, shown_hash="")
    conversation.refresh_from_db()
    assert last_reply(conversation) == "You answered: 7."


def test_a_choice_and_a_date(alice, agent):
    conversation, approval = asked(alice, agent, "ask me to choose between tea, coffee and water")
    assert approval.question["options"] == ["tea", "coffee", "water"]
    answer(approval.pk, user=alice, via=Approval.Via.API, value="water", shown_hash="")
    assert last_reply(Conversation.objects.get(pk=conversation.pk)) == "You answered: water."

    conversation, approval = asked(alice, agent, "ask me for a date")
    with pytest.raises(InvalidAnswer, match="is not a date"):
        answer(approval.pk, user=alice, via=Approval.Via.API, value="2026-02-30", shown_hash="")
    answer(approval.pk, user=alice, via=Approval.Via.API, value="2026-12-01", shown_hash="")
    assert last_reply(Conversation.objects.get(pk=conversation.pk)) == "You answered: 2026-12-01."


def test_a_declined_question_tells_the_model_who_declined_and_why(alice, agent):
    conversation, approval = asked(alice, agent, "ask me my password")
    answer(approval.pk, user=alice, via=Approval.Via.API, decline=True, reason="I will not say", shown_hash="")
    conversation.refresh_from_db()
    assert last_reply(conversation) == "You declined to answer (I will not say)."
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.REJECTED
    assert call.result.endswith("The human (alice) declined to answer: I will not say.")
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.answer) == ("declined", "I will not say", None)


def test_the_first_answer_wins(alice, bob, agent):
    _, approval = asked(alice, agent, "ask me what to call the file")
    answer(approval.pk, user=bob, via=Approval.Via.DASHBOARD, value="first", shown_hash="")
    from approvals.services import AlreadyDecided

    with pytest.raises(AlreadyDecided):
        answer(approval.pk, user=alice, via=Approval.Via.CHAT, value="second", shown_hash="")
    approval.refresh_from_db()
    assert (approval.answer, approval.decided_by) == ("first", bob)


def test_a_question_is_answered_not_approved_and_an_action_is_not_answered(alice, agent):
    _, question_ = asked(alice, agent, "ask me what to call the file")
    with pytest.raises(WrongKind):
        decide(question_.pk, user=alice, approve=True, via=Approval.Via.API, shown_hash="")
    _, action = asked(alice, agent, "write hi to a.txt")
    with pytest.raises(WrongKind):
        answer(action.pk, user=alice, via=Approval.Via.API, value="yes", shown_hash="")


def test_an_expired_question_tells_the_model_no_answer_came(alice, agent):
    conversation, approval = asked(alice, agent, "ask me what to call the file")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_overdue() == [approval.pk]
    conversation.refresh_from_db()
    assert last_reply(conversation) == "No answer came, so I will not go on with that."
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == ToolCall.Status.EXPIRED
    assert call.result.endswith("No answer came: the question expired unanswered.")


def test_a_plan_approved_without_its_optional_step(alice, agent):
    conversation, approval = asked(alice, agent, "plan a tidy-up")
    assert approval.kind == "plan"
    assert [(s["index"], s["optional"]) for s in approval.plan["steps"]] == [(1, False), (2, True), (3, False)]
    with pytest.raises(InvalidAnswer, match="Step 3 .* is required"):
        decide(approval.pk, user=alice, approve=True, via=Approval.Via.API, steps=[1, 2], shown_hash="")

    decide(approval.pk, user=alice, approve=True, via=Approval.Via.API, steps=[1, 3], shown_hash="")
    conversation.refresh_from_db()
    assert last_reply(conversation) == "Approved steps: 1, 3."
    approval.refresh_from_db()
    assert approval.answer == {"approved_steps": [1, 3], "dropped_steps": [2]}
    result = ToolCall.objects.get(pk=approval.tool_call_id).result
    assert result.endswith("Approved steps: 1, 3. Dropped steps, not to be taken: 2.")


def test_a_rejected_plan_tells_the_model_to_take_none_of_it(alice, agent):
    conversation, approval = asked(alice, agent, "plan a tidy-up")
    decide(approval.pk, user=alice, approve=False, via=Approval.Via.API, reason="not today", shown_hash="")
    conversation.refresh_from_db()
    assert last_reply(conversation) == "You rejected the plan (not today): I will not follow it."
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.REJECTED


def test_arguments_the_type_does_not_allow_go_back_to_the_model_as_an_error(alice, agent):
    bad = json.dumps({"question": "How many?", "type": "number", "options": ["1", "2"]})
    conversation = start_conversation(alice, agent, f"call ask_human with {bad}")
    call = ToolCall.objects.get(message__conversation=conversation)
    assert call.status == ToolCall.Status.FAILED
    assert call.error == "Invalid arguments for ask_human: options: only a choice question has options, not a number question."
    assert not Approval.objects.filter(conversation=conversation).exists()


def test_request_human_input_is_the_same_tool_under_its_other_name(alice, agent):
    agent.tools = [*agent.tools, "request_human_input"]
    agent.save()
    arguments = json.dumps({"question": "Ready?", "type": "confirm"})
    conversation = start_conversation(alice, agent, f"call request_human_input with {arguments}")
    [approval] = pending_approvals(conversation)
    assert (approval.kind, approval.question["type"]) == ("question", "confirm")
    answer(approval.pk, user=alice, via=Approval.Via.API, value=True, shown_hash="")
    conversation.refresh_from_db()
    assert last_reply(conversation) == "You answered: yes."


def test_the_audit_chain_covers_questions_and_plans(alice, agent):
    _, question_ = asked(alice, agent, "ask me what to call the file")
    answer(question_.pk, user=alice, via=Approval.Via.API, value="notes", shown_hash="")
    _, plan = asked(alice, agent, "plan a tidy-up")
    decide(plan.pk, user=alice, approve=True, via=Approval.Via.API, steps=[1, 3], shown_hash="")
    assert audit.verify().is_intact
    with triggers_dropped():  # as the tables' owner could
        Approval.objects.filter(pk=question_.pk).update(answer="forged")
    verdict = audit.verify()
    assert (verdict.broken_at, verdict.why) == (question_.pk, "its content no longer matches its hash: it was changed after the decision")


# --- Typed replies ------------------------------------------------------------------------------


def test_a_typed_reply_answers_the_one_pending_question(alice, agent):
    conversation, approval = asked(alice, agent, "ask me for a number between 1 and 10")
    services.post_message(conversation=conversation, user=alice, content="eleven")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    notice = conversation.messages.filter(role=Message.Role.SYSTEM).last().content
    assert notice.startswith("That does not answer the question: Answer with a number. Nothing was decided")

    services.post_message(conversation=conversation, user=alice, content="7")
    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_via) == ("answered", 7, "text")
    conversation.refresh_from_db()
    assert last_reply(conversation) == "You answered: 7."
    typed = conversation.messages.filter(role=Message.Role.USER, content="7").get()
    assert typed.in_model_context is False  # the model reads the answer as the call's result


def test_typed_text_decides_nothing_while_calls_are_pending_beside_a_question(alice, agent):
    conversation, question_ = asked(alice, agent, "ask me what to call the file")
    other = ToolCall.objects.get(pk=question_.tool_call_id)
    Approval.objects.create(  # a gated call of the same turn, as a model asking and acting at once makes
        tool_call=ToolCall.objects.create(message=other.message, position=1, call_id="c2", name="write_file",
                                          arguments={"path": "a", "content": "b"}, status="pending_approval", is_gated=True),
        conversation=conversation, requested_by=alice, reason="r", arguments_hash="h",
    )
    services.post_message(conversation=conversation, user=alice, content="yes")
    assert len(pending_approvals(conversation)) == 2
    assert "each is decided on its card: nothing was decided" in conversation.messages.filter(role="system").last().content


# --- Bulk ----------------------------------------------------------------------------------------


def test_approve_all_leaves_questions_and_plans_to_be_answered_and_reject_all_declines_them(alice, agent):
    _, question_ = asked(alice, agent, "ask me what to call the file")
    _, plan = asked(alice, agent, "plan a tidy-up")
    outcome = decide_many(dict.fromkeys([question_.pk, plan.pk], ""), user=alice, approve=True, via=Approval.Via.API)
    assert (outcome.decided, outcome.needs_answer) == ([], [question_.pk, plan.pk])

    outcome = decide_many(dict.fromkeys([question_.pk, plan.pk], ""), user=alice, approve=False, via=Approval.Via.API, reason="no")
    assert {(a.pk, a.status) for a in outcome.decided} == {(question_.pk, "declined"), (plan.pk, "rejected")}
    assert audit.verify().is_intact


# --- The JSON API --------------------------------------------------------------------------------


def test_the_api_answers_a_question_and_refuses_a_bad_second_or_hidden_answer(alice, mallory, agent, api_as):
    _, approval = asked(alice, agent, "ask me to choose between tea, coffee and water")
    api = api_as(alice)
    listed = api.get("approvals", status="pending", kind="question").json()
    assert [item["id"] for item in listed["items"]] == [approval.pk]
    item = listed["items"][0]
    assert (item["kind"], item["question"]["options"], item["plan"], item["answer"]) == ("question", ["tea", "coffee", "water"], None, None)
    assert api.get("approvals", kind="plan").json()["count"] == 0

    assert api_as(mallory).post(f"approvals/{approval.pk}/answer", {"answer": "tea"}).status_code == 404
    refused = api.post(f"approvals/{approval.pk}/answer", {"answer": "beer"})
    assert (refused.status_code, refused.json()["detail"]) == (400, "Choose one of: tea, coffee, water.")
    assert api.post(f"approvals/{approval.pk}/answer", {}).status_code == 400
    assert api.post(f"approvals/{approval.pk}/decision", {"decision": "approve"}).status_code == 400

    answered = api.post(f"approvals/{approval.pk}/answer", {"answer": "tea"})
    assert answered.status_code == 200
    assert (answered.json()["status"], answered.json()["answer"]) == ("answered", "tea")
    again = api.post(f"approvals/{approval.pk}/answer", {"answer": "coffee"})
    assert (again.status_code, again.json()["status"]) == (409, "answered")


def test_the_api_declines_a_question(alice, agent, api_as):
    _, approval = asked(alice, agent, "ask me what to call the file")
    declined = api_as(alice).post(f"approvals/{approval.pk}/answer", {"decline": True, "reason": "later"})
    assert declined.status_code == 200
    assert (declined.json()["status"], declined.json()["rejection_reason"]) == ("declined", "later")


def test_the_api_approves_a_plan_with_its_steps(alice, agent, api_as):
    _, approval = asked(alice, agent, "plan a tidy-up")
    api = api_as(alice)
    item = api.get("approvals", kind="plan").json()["items"][0]
    assert item["plan"]["steps"][1] == {
        "index": 2, "action": "Tell bob@example.com", "description": "Send a short email about it.", "optional": True, "tool": "",
        "estimated_duration": None,
    }
    missing = api.post(f"approvals/{approval.pk}/decision", {"decision": "approve", "steps": [1]})
    assert (missing.status_code, missing.json()["detail"]) == (400, "Step 3 (Do it: a tidy-up) is required: keep it, or reject the whole plan.")
    approved = api.post(f"approvals/{approval.pk}/decision", {"decision": "approve", "steps": [1, 3]})
    assert approved.status_code == 200
    assert approved.json()["answer"] == {"approved_steps": [1, 3], "dropped_steps": [2]}
    bulk = api.post("approvals/decisions", {"decision": "approve", "ids": [approval.pk]})
    assert bulk.json()["already_decided"] == [approval.pk]


# --- The pages: the card's forms, in the chat and on the dashboard -------------------------------

HTMX = {"HX-Request": "true"}


def test_a_card_answers_a_question_and_shows_why_a_wrong_answer_is_refused(alice, agent):
    _, approval = asked(alice, agent, "ask me for a number between 1 and 10")
    client = client_for(alice, csrf=False)
    page = client.get(f"/conversations/{approval.conversation_id}/").content.decode()
    assert f'action="/approvals/{approval.pk}/answer/"' in page and 'type="number"' in page and 'min="1"' in page and 'max="10"' in page

    refused = client.post(f"/approvals/{approval.pk}/answer/", {"answer": "11"}, headers=HTMX)
    assert refused.status_code == 400
    assert "Answer with a number between 1 and 10." in refused.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending"

    answered = client.post(f"/approvals/{approval.pk}/answer/", {"answer": "7"}, headers=HTMX)
    assert answered.status_code == 200 and "Answered by alice via chat" in answered.content.decode()
    approval.refresh_from_db()
    assert (approval.answer, approval.decided_via) == (7, "chat")


@pytest.mark.parametrize(
    ("arguments", "form", "stored"),
    [
        ({"question": "Which?", "type": "multi_choice", "options": ["a", "b", "c"]}, {"answer": ["c", "a"]}, ["a", "c"]),
        ({"question": "Sure?", "type": "confirm"}, {"answer": "false"}, False),
        ({"question": "Name?", "type": "text"}, {"answer": "  notes  "}, "notes"),
    ],
)
def test_the_dashboard_answers_each_type_from_its_form(alice, bob, agent, arguments, form, stored):
    conversation = start_conversation(alice, agent, f"call ask_human with {json.dumps(arguments)}")
    [approval] = pending_approvals(conversation)
    client = client_for(bob)
    dashboard = client.get("/approvals/?kind=question").content.decode()
    assert f'action="/approvals/dashboard/{approval.pk}/answer/"' in dashboard
    response = client.post(f"/approvals/dashboard/{approval.pk}/answer/", form, headers=HTMX)
    assert response.status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.answer, approval.decided_by, approval.decided_via) == ("answered", stored, bob, "dashboard")


def test_the_dashboard_filters_by_kind_and_its_answer_route_is_for_approvers(alice, bob, mallory, agent):
    _, question_ = asked(alice, agent, "ask me what to call the file")
    _, action = asked(alice, agent, "write hi to a.txt")
    client = client_for(bob)
    questions_only = client.get("/approvals/?kind=question").content.decode()
    assert f"approval-row-{question_.pk}" in questions_only and f"approval-row-{action.pk}" not in questions_only
    actions_only = client.get("/approvals/?kind=action").content.decode()
    assert f"approval-row-{action.pk}" in actions_only and f"approval-row-{question_.pk}" not in actions_only
    # The owner answers on the chat's card; the dashboard's route is for approvers; others see nothing.
    assert client_for(alice).post(f"/approvals/dashboard/{question_.pk}/answer/", {"answer": "x"}).status_code == 403
    assert client_for(mallory).post(f"/approvals/{question_.pk}/answer/", {"answer": "x"}).status_code == 404
    question_.refresh_from_db()
    assert question_.status == "pending"


def test_the_answer_form_needs_its_csrf_token(alice, agent):
    _, approval = asked(alice, agent, "ask me what to call the file")
    response = client_for(alice, csrf=True).post(f"/approvals/{approval.pk}/answer/", {"answer": "x"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_a_plans_card_approves_the_ticked_steps_and_refuses_to_drop_a_required_one(alice, agent):
    _, approval = asked(alice, agent, "plan a tidy-up")
    client = client_for(alice)
    refused = client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "plan": "1", "steps": ["1"]}, headers=HTMX)
    assert refused.status_code == 400 and "Step 3 (Do it: a tidy-up) is required" in refused.content.decode()
    approved = client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "plan": "1", "steps": ["1", "3"]}, headers=HTMX)
    assert approved.status_code == 200 and "Approved (steps 1, 3)" in approved.content.decode()


# --- Confirmations with their own words (issue 39, item 5) -------------------------------------


def test_a_confirmation_keeps_its_details_and_the_words_of_its_buttons():
    asked = questions.normalize({"message": "Delete 3 files?", "type": "confirm", "details": "a.txt, b.txt, c.txt",
                                 "confirm_label": " Delete ", "cancel_label": "Go  back"})

    assert (asked["text"], asked["details"], asked["confirm_label"], asked["cancel_label"]) == (
        "Delete 3 files?", "a.txt, b.txt, c.txt", "Delete", "Go back")
    assert questions.labels(asked) == ("Delete", "Go back")
    assert questions.from_text(asked, "delete") is True and questions.from_text(asked, "Go back.") is False
    assert questions.from_text(asked, "yes") is True  # the plain words still answer
    assert questions.labels(question(type="confirm")) == ("Yes", "No")
    assert "confirm_label" not in question(type="text")  # other types store nothing more


@pytest.mark.parametrize(("arguments", "field"), [
    ({"type": "text", "confirm_label": "Delete"}, "confirm_label"),
    ({"type": "choice", "options": ["a", "b"], "details": "x"}, "details"),
    ({"type": "confirm", "confirm_label": "x" * 41}, "confirm_label"),
    ({"type": "confirm", "confirm_label": "Go", "cancel_label": "go"}, "confirm_label, cancel_label"),
])
def test_a_confirmations_words_that_do_not_fit_are_refused_naming_the_field(arguments, field):
    with pytest.raises(questions.InvalidQuestion) as refused:
        question(**arguments)
    assert str(refused.value).startswith(field + ":")


def test_the_scripted_confirmation_shows_its_words_on_the_card_and_in_the_api(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "ask me to confirm deleting the drafts with Delete or Go back")
    [asked] = pending_approvals(conversation)

    shown = api_as(alice).get(f"approvals/{asked.pk}").json()["question"]
    card = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert (shown["type"], shown["confirm_label"], shown["cancel_label"]) == ("confirm", "Delete", "Go back")
    assert shown["details"] == "You asked me to confirm deleting the drafts."
    assert '<button class="btn approve" type="submit" name="answer" value="true">Delete</button>' in card
    assert '<button class="btn" type="submit" name="answer" value="false">Go back</button>' in card
    assert "You asked me to confirm deleting the drafts." in card
    services.post_message(conversation=conversation, user=alice, content="Go back")  # the button's words, typed
    asked.refresh_from_db()
    assert (asked.status, asked.answer, asked.decided_via) == ("answered", False, "text")
