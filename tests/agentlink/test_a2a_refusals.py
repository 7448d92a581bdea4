"""A2A decisions that are refused (decisions.apply): an id decided twice, not the task's, already
decided or lost to another surface, a bad shape or type, a question approved, a tool call answered,
four eyes, a critical call without its confirmation. A refused message decides nothing at all."""
import pytest

from a2a.types import a2a_pb2 as pb
from agentlink import decisions, runs
from approvals.models import Approval
from approvals.services import decide
from chat.models import Message
from tests.agentlink.a2a_client import State, a2a_task, data_parts, refused, send, snapshot, statuses
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def test_an_id_decided_twice_in_one_message_is_refused_and_decides_nothing(alice, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    twice = refused(task, alice, {"decisions": [{"id": first.pk, "decision_type": "approve"},
                                                {"id": first.pk, "decision_type": "deny"}]})
    across_parts = refused(task, alice, {"decisions": [{"id": second.pk, "decision_type": "approve"}]},
                           {"approvals": [{"id": second.pk, "approved": False}]})

    assert f"Approval #{first.pk} is decided twice" in twice.message
    assert f"Approval #{second.pk} is decided twice" in across_parts.message
    assert statuses(task) == ["pending", "pending"]


def test_an_id_that_is_not_one_of_the_tasks_pending_calls_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    other = a2a_task(alice, agent, "write hello to b.txt")
    [theirs] = pending_approvals(other.conversation)

    for wrong in (theirs.pk, 999_999):
        refusal = refused(task, alice, {"decisions": [{"id": wrong, "decision_type": "approve"}]})
        assert refusal.message == f"Approval #{wrong} is not one of this task's pending calls."
        assert refusal.data is None  # another conversation's approval is not described
    for no_id in ({"decision_type": "approve"}, {"id": 0, "decision_type": "approve"}, {"id": True, "decision_type": "approve"},
                  {"id": "#1", "decision_type": "approve"}):
        assert 'names its call by "id"' in refused(task, alice, {"decisions": [no_id]}).message
    assert statuses(task) == ["pending"] and statuses(other) == ["pending"]


def test_an_id_already_decided_names_who_decided_and_via_what(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    decide(approval.pk, user=alice, approve=False, via="api", reason="no", shown_hash=approval.shown_hash)

    refusal = refused(task, alice, {"decisions": [{"id": approval.pk, "decision_type": "approve"}]})

    assert refusal.message == f"Approval #{approval.pk} was already rejected by alice via api."
    assert refusal.data == {"id": approval.pk, "status": "rejected", "decided_by": "alice", "decided_via": "api"}
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "api", "no")


def test_a_decision_that_loses_the_race_to_another_surface_is_refused_naming_the_winner(alice, bob, agent):
    task = a2a_task(alice, agent, "delete a.txt and b.txt")
    shown = runs.read(task).pending  # what the task showed before bob decided in the dashboard
    first, second = shown
    decide(second.pk, user=bob, approve=False, via="dashboard", reason="keep b", shown_hash=second.shown_hash)

    refusal = refused(task, alice, {"decisions": [{"id": first.pk, "decision_type": "deny"},
                                                  {"id": second.pk, "decision_type": "approve"}]}, pending=shown)

    assert refusal.message.startswith(f"Approval #{second.pk} was already rejected by bob via dashboard.")
    assert refusal.message.endswith("Nothing was decided.")  # every decision is checked before any is made
    assert refusal.data["decided_by"] == "bob" and refusal.data["decided_via"] == "dashboard"
    assert [(a.status, a.decided_via) for a in Approval.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")] == [
        ("pending", ""), ("rejected", "dashboard")]


def test_a_bad_decision_type_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    for decision_type in ("maybe", "APPROVE", True, None, 1):
        blanket = refused(task, alice, {"decision_type": decision_type})
        per_id = refused(task, alice, {"decisions": [{"id": approval.pk, "decision_type": decision_type}]})
        assert blanket.message == per_id.message == '"decision_type" is "approve" or "deny".', decision_type
    assert statuses(task) == ["pending"]


UNREADABLE = [
    ([{}], "That data part decides nothing."),
    ([{"approve": True}], "That data part decides nothing."),
    ([{"type": "tool_approval_response"}], "That data part decides nothing."),
    ([{"decisions": []}], '"decisions" is a non-empty list of objects.'),
    ([{"decisions": "approve"}], '"decisions" is a non-empty list of objects.'),
    ([{"approvals": [1, 2]}], '"approvals" is a non-empty list of objects.'),
    ([{"answers": [{"id": 1}]}], 'Each of "answers" needs "answer", or "decline": true.'),
    ([], "The message has no text and no data part"),
    (["   "], "The message has no text and no data part"),
]


def test_an_empty_or_unknown_data_part_is_refused_and_says_which_shapes_decide(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    for parts, says in UNREADABLE:
        refusal = refused(task, alice, *parts)
        assert refusal.message.startswith(says), parts
        assert refusal.data is None
    assert decisions.SHAPES in refused(task, alice, {"foo": 1}).message

    assert statuses(task) == ["pending"]
    assert Message.objects.filter(conversation=task.conversation, role="user").count() == 1  # nothing posted


def test_a_data_part_that_is_not_an_object_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    part = pb.Part()
    part.data.list_value.values.add().string_value = "approve"
    built = pb.Message(role=pb.Role.ROLE_USER, message_id="m-1", parts=[part])

    with pytest.raises(decisions.Refused) as caught:
        decisions.apply(conversation=task.conversation, user=alice, message=built, pending=runs.read(task).pending, shown={})

    assert caught.value.message.startswith("A data part must be a JSON object.")
    assert statuses(task) == ["pending"]


def test_approved_that_is_not_a_bool_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    for approved in ("yes", 1, None, "true"):
        entry = {"id": approval.pk} | ({} if approved is None else {"approved": approved})
        refusal = refused(task, alice, {"type": "tool_approval_response", "approvals": [entry]})
        assert refusal.message == 'Each of "approvals" needs "approved": true or false.', approved
    assert statuses(task) == ["pending"]


def test_approving_a_question_is_refused_it_must_be_answered(alice, agent):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)
    assert question.kind == Approval.Kind.QUESTION

    per_id = refused(task, alice, {"decisions": [{"id": question.pk, "decision_type": "approve"}]})
    kagent = refused(task, alice, {"approvals": [{"id": question.pk, "approved": True}]})
    blanket = refused(task, alice, {"decision_type": "approve"})  # a blanket approve skips questions

    assert per_id.message.startswith(f"Approval #{question.pk} is a question: answer it with")
    assert kagent.message == per_id.message
    assert blanket.message.startswith("The message decides none of the pending calls.")
    assert statuses(task) == ["pending"]


def test_answering_a_tool_call_is_refused(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    for entry in ({"id": approval.pk, "answer": "yes"}, {"id": approval.pk, "decline": True, "reason": "no"}):
        refusal = refused(task, alice, {"answers": [entry]})
        assert refusal.message == f"Approval #{approval.pk} is a tool call, not a question: approve or deny it."
    assert statuses(task) == ["pending"]


def test_the_owner_may_not_approve_a_call_that_needs_an_approver_but_may_deny_it(alice, ops_agent):
    task = a2a_task(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(task.conversation)
    assert approval.approver_required

    for parts in ({"decision_type": "approve"}, {"decisions": [{"id": approval.pk, "decision_type": "approve"}]},
                  {"approvals": [{"id": approval.pk, "approved": True}]}):
        refusal = refused(task, alice, parts)
        assert refusal.message == f"Approval #{approval.pk} needs an approver other than the requester (four eyes)."
    assert statuses(task) == ["pending"]

    assert send(task, alice, {"decision_type": "deny", "reason": "not now"}) == 1  # saying no needs no second pair of eyes
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "a2a", "not now")


def test_a_message_with_one_refused_decision_decides_none_of_the_others(alice, ops_agent):
    task = a2a_task(alice, ops_agent, "delete a.txt and b.txt")
    first, second = pending_approvals(task.conversation)

    refusal = refused(task, alice, {"decisions": [{"id": first.pk, "decision_type": "deny"},
                                                  {"id": second.pk, "decision_type": "approve"}]})

    assert "four eyes" in refusal.message
    assert statuses(task) == ["pending", "pending"]  # the deny before it was not decided either


def test_a_critical_call_is_approved_only_with_its_confirmation(alice, agent):
    task = a2a_task(alice, agent, "delete all files")
    [approval] = pending_approvals(task.conversation)
    assert (approval.risk, approval.confirmation_required, approval.confirmation_hint) == ("critical", True, "DELETE")
    [request] = data_parts(snapshot(task))["tool_approval"]["action_requests"]
    assert (request["confirmation_required"], request["confirmation_hint"]) == (True, "DELETE")

    for parts in ({"decision_type": "approve"}, {"decision_type": "approve", "confirmation": "delete"},
                  {"decisions": [{"id": approval.pk, "decision_type": "approve", "confirmation": "DELET"}]},
                  {"approvals": [{"id": approval.pk, "approved": True}]}):
        refusal = refused(task, alice, parts)
        assert refusal.message == f'Approval #{approval.pk} is critical: approve it with "confirmation": "DELETE".'
    assert statuses(task) == ["pending"]

    assert send(task, alice, {"decisions": [{"id": approval.pk, "decision_type": "approve", "confirmation": " DELETE "}]}) == 1

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "a2a", alice)
    assert runs.read(task).state == State.TASK_STATE_COMPLETED
