"""The A2A JSON-RPC methods through the ASGI app, in process: GetTask, SendMessage, SubscribeToTask
and CancelTask, the 0.3 method names, refusals as invalid params naming who decided, and internal
errors that leak nothing. tests/e2e/protocols/test_a2a_e2e.py drives the same through daphne and a
worker, tests/e2e/faults/test_a2a_load.py under load."""
import pytest
from django.db import connection

from agentlink.models import Task
from approvals.models import Approval
from approvals.services import decide
from chat.models import ApiToken
from tests.agentlink.a2a_client import a2a_task, call, rpc, send, statuses
from tests.conftest import pending_approvals

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def test_get_task_answers_the_owner_and_is_task_not_found_for_anyone_else(alice, mallory, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    mine = rpc(ApiToken.issue(alice), "GetTask", {"id": str(task.pk)})
    theirs = rpc(ApiToken.issue(mallory), "GetTask", {"id": str(task.pk)})
    nonsense = rpc(ApiToken.issue(mallory), "GetTask", {"id": "nope"})

    assert mine["result"]["id"] == str(task.pk)
    assert mine["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "result" not in theirs and theirs["id"] == 7
    assert theirs["error"]["code"] == -32001 and "not found" in theirs["error"]["message"].lower()
    assert nonsense["error"]["code"] == theirs["error"]["code"]


def test_the_0_3_method_names_apply_without_the_version_header(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")

    result = rpc(ApiToken.issue(alice), "tasks/get", {"id": str(task.pk)}, version=None)["result"]

    assert (result["kind"], result["status"]["state"]) == ("task", "input-required")


def test_a_refused_decision_over_json_rpc_is_invalid_params_with_who_decided(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)
    token = ApiToken.issue(alice)
    bad = {"message": {"role": "ROLE_USER", "messageId": "m1", "taskId": str(task.pk),
                       "parts": [{"data": {"decision_type": "maybe"}}]}}

    refusal = rpc(token, "SendMessage", bad)

    assert refusal["error"]["code"] == -32602 and '"decision_type" is "approve" or "deny".' in refusal["error"]["message"]
    assert statuses(task) == ["pending"]

    decide(approval.pk, user=alice, approve=False, via="api", shown_hash=approval.shown_hash)
    late = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk),
                        "parts": [{"data": {"decisions": [{"id": approval.pk, "decision_type": "approve"}]}}]}}
    after = rpc(token, "SendMessage", late)
    assert after["error"]["code"] == -32602
    assert f"Approval #{approval.pk} was already rejected by alice via api." in after["error"]["message"]
    [info] = after["error"]["data"]  # the SDK carries Refused.data as a google.rpc.ErrorInfo's metadata
    assert info["metadata"] == {"id": approval.pk, "status": "rejected", "decided_by": "alice", "decided_via": "api"}


def test_send_message_starts_a_task_that_pauses_and_a_decision_completes_it(alice, agent):
    token = ApiToken.issue(alice)
    start = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "write hello to a.txt"}]}}

    paused = rpc(token, "SendMessage", start)["result"]["task"]

    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task = Task.objects.get(pk=paused["id"])
    [approval] = pending_approvals(task.conversation)
    decision = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": paused["id"],
                            "parts": [{"data": {"decisions": [{"id": approval.pk, "decision_type": "approve"}]}}]}}
    done = rpc(token, "SendMessage", decision)["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][-1]["parts"][0]["text"] == "I did write a.txt: Wrote 5 bytes to a.txt."
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "a2a")



def test_subscribing_to_a_task_that_is_over_is_the_specifications_unsupported_operation(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, {"decision_type": "approve"})
    body = {"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": str(task.pk)}}

    response = call("POST", "/a2a/demo/", token=ApiToken.issue(alice), headers={"A2A-Version": "1.0"}, json=body)

    text = response.text
    assert response.status_code == 200 and '"code":-32004' in text.replace(" ", "") and "nothing to subscribe to" in text, text


def test_a_message_on_a_task_that_is_over_is_refused_and_says_to_start_a_new_one(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    send(task, alice, {"decision_type": "approve"})
    later = {"message": {"role": "ROLE_USER", "messageId": "m3", "taskId": str(task.pk), "parts": [{"text": "read a.txt"}]}}

    refusal = rpc(ApiToken.issue(alice), "SendMessage", later)

    assert refusal["error"]["code"] == -32004  # UnsupportedOperationError: the specification's for a terminal task
    assert refusal["error"]["message"] == (
        f"Task {task.pk} is completed: it takes no decision now; send a new message with its contextId and no taskId.")
    assert Task.objects.filter(conversation_id=task.conversation_id).count() == 1


def test_cancel_task_is_the_stop_and_list_tasks_shows_only_the_callers_own(alice, mallory, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)

    listed = rpc(token, "ListTasks", {})["result"]
    assert [t["id"] for t in listed["tasks"]] == [str(task.pk)]
    assert rpc(ApiToken.issue(mallory), "ListTasks", {})["result"].get("tasks", []) == []
    assert rpc(ApiToken.issue(mallory), "CancelTask", {"id": str(task.pk)})["error"]["code"] == -32001

    canceled = rpc(token, "CancelTask", {"id": str(task.pk)})["result"]

    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert Task.objects.get(pk=task.pk).canceled
    approval = Approval.objects.get(conversation_id=task.conversation_id)
    assert (approval.status, approval.decided_via) == ("cancelled", "a2a")
    assert rpc(token, "CancelTask", {"id": str(task.pk)})["error"]["code"] == -32002  # over: not cancelable


def test_an_internal_error_says_internal_error_with_an_id_that_the_log_carries(alice, agent, caplog):
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)
    with connection.cursor() as cursor:  # the database loses a table under the running server
        cursor.execute("ALTER TABLE approvals_approval RENAME TO approvals_approval_gone")
    try:
        error = rpc(token, "GetTask", {"id": str(task.pk)})["error"]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE approvals_approval_gone RENAME TO approvals_approval")

    error_id = error["message"].removeprefix("internal error (id ").removesuffix(")")
    assert error["code"] == -32603 and error["message"] == f"internal error (id {error_id})" and len(error_id) == 12
    assert "approvals_approval" not in str(error)  # the database's words stay in the log
    [logged] = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged.exc_info and "approvals_approval" in str(logged.exc_info[1])


@pytest.mark.parametrize("body", ["[" * 1000 + "]" * 1000, '{"jsonrpc": "2.0", "id": 1, "params": ' * 300 + "{}" + "}" * 300, "{"])
def test_a_body_that_is_not_json_we_take_is_a_parse_error_not_an_internal_one(alice, agent, body):
    """Nested 1,000 (or 300) deep (the SDK's own parser recursed into -32603, "maximum recursion depth
    exceeded"), or not JSON at all: JSON-RPC's parse error, and nothing started."""
    response = call("POST", "/a2a/demo/", token=ApiToken.issue(alice), headers={"A2A-Version": "1.0", "Content-Type": "application/json"},
                    content=body.encode())
    assert response.status_code == 200, response.text
    error = response.json()["error"]
    assert error["code"] == -32700 and "recursion" not in error["message"], error
    assert not Task.objects.exists()
