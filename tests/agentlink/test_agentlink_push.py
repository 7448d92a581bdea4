"""A2A push notification configs (agentlink.push): set, get, list and delete over JSON-RPC, each
config its owner's; URLs checked as web_fetch's are (http(s), public unless the agent's operator
allows private addresses); a task's state changes POSTed by the SDK's sender to a local receiver
with the config's token, retried while it fails. In process, eager Celery; tests/e2e/protocols/test_a2a_seeds_e2e.py
drives the same through daphne and a worker."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from agentlink import push
from agentlink.app import MAX_BODY_BYTES
from agentlink.models import PushConfig, Task
from approvals.models import Approval
from chat.models import Conversation
from chat.models import ApiToken
from tests.conftest import pending_approvals, wait_until
from tests.agentlink.a2a_client import a2a_task, call, rpc

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A client's push endpoint on loopback: records each POST (its token header and body) and
    answers with `status` (a list: one per POST, the last repeated)."""

    def __init__(self, statuses=(200,)):
        self.received: list[tuple[str, dict]] = []
        self.statuses = list(statuses)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append((self.headers.get("X-A2A-Notification-Token", ""), json.loads(body)))
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def states(self, token: str = "") -> list[str]:
        return [body["task"]["status"]["state"] for sent, body in self.received if sent == token or not token]


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture
def private_ok(agent):
    """The operator lets this agent reach private addresses (web_fetch's switch): the receiver is on loopback."""
    agent.allow_private_fetch = True
    agent.save(update_fields=["allow_private_fetch"])
    return agent


def create(api_token: str, task_id: str, **config) -> dict:
    return rpc(api_token, "CreateTaskPushNotificationConfig", {"taskId": task_id, **config})


def error_of(answer: dict) -> str:
    assert "error" in answer, answer
    return answer["error"]["message"]


# --- The configs ------------------------------------------------------------------------------------


def test_a_config_is_set_read_listed_replaced_and_deleted_by_its_owner(alice, private_ok, receiver):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, private_ok, "write hello to a.txt")

    made = create(token, str(task.pk), url=receiver.url, token="secret-1")["result"]
    assert made == {"id": str(task.pk), "taskId": str(task.pk), "url": receiver.url, "token": "secret-1"}  # id: the task's
    create(token, str(task.pk), id="second", url=receiver.url, token="secret-2", authentication={"scheme": "Bearer", "credentials": "c"})

    got = rpc(token, "GetTaskPushNotificationConfig", {"taskId": str(task.pk), "id": "second"})["result"]
    assert got["authentication"] == {"scheme": "Bearer", "credentials": "c"}
    listed = rpc(token, "ListTaskPushNotificationConfigs", {"taskId": str(task.pk)})["result"]["configs"]
    assert [(c["id"], c["token"]) for c in listed] == [(str(task.pk), "secret-1"), ("second", "secret-2")]

    create(token, str(task.pk), id="second", url=receiver.url, token="secret-3")  # the same id: replaced
    assert PushConfig.objects.get(task=task, config_id="second").token == "secret-3"
    assert "result" in rpc(token, "DeleteTaskPushNotificationConfig", {"taskId": str(task.pk), "id": "second"})

    assert list(PushConfig.objects.filter(task=task).values_list("config_id", "owner")) == [(str(task.pk), alice.pk)]
    missing = rpc(token, "GetTaskPushNotificationConfig", {"taskId": str(task.pk), "id": "second"})
    assert "not found" in error_of(missing)


def test_the_card_says_push_notifications_and_kagents_hitl_extension(alice, agent):
    card = call("GET", "/a2a/demo/.well-known/agent-card.json", token=ApiToken.issue(alice)).json()
    assert card["capabilities"]["pushNotifications"] is True
    [extension] = card["capabilities"]["extensions"]
    assert (extension["uri"], extension.get("required", False)) == ("https://kagent.dev/extensions/hitl/v1", False)


def test_another_users_token_can_neither_set_nor_read_nor_delete_configs_on_a_task_not_theirs(alice, mallory, private_ok, receiver):
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    create(ApiToken.issue(alice), str(task.pk), url=receiver.url, token="alices")
    intruder = ApiToken.issue(mallory)

    for method, params in (
        ("CreateTaskPushNotificationConfig", {"taskId": str(task.pk), "url": receiver.url, "token": "mallorys"}),
        ("GetTaskPushNotificationConfig", {"taskId": str(task.pk), "id": str(task.pk)}),
        ("ListTaskPushNotificationConfigs", {"taskId": str(task.pk)}),
        ("DeleteTaskPushNotificationConfig", {"taskId": str(task.pk), "id": str(task.pk)}),
    ):
        answer = rpc(intruder, method, params)
        assert "not found" in error_of(answer).lower(), (method, answer)
        assert "alices" not in json.dumps(answer)
    assert list(PushConfig.objects.values_list("token", "owner")) == [("alices", alice.pk)]


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:9/hook", "Refused: 127.0.0.1 is a private address"),
    ("http://localhost:9/hook", "is a private address"),
    ("http://10.1.2.3/hook", "Refused: 10.1.2.3 is a private address"),
    ("http://169.254.169.254/latest/meta-data", "is a private address"),
    ("http://[::1]:9/hook", "is a private address"),
    ("http://[::ffff:127.0.0.1]:9/hook", "is a private address"),
    ("ftp://example.com/hook", "is http(s) with a host"),
    ("file:///etc/passwd", "is http(s) with a host"),
    ("javascript:alert(1)", "is http(s) with a host"),
    ("not a url", "is http(s) with a host"),
    ("", "Validation failed"),  # the SDK's: url is required
    ("http://" + "a" * 2100 + ".example/", "url is at most 2000 characters"),
])
def test_a_url_that_is_not_public_http_is_refused_with_a_clear_error_and_nothing_is_stored(alice, agent, url, says):
    task = a2a_task(alice, agent, "write hello to a.txt")

    answer = create(ApiToken.issue(alice), str(task.pk), url=url, token="t")

    assert answer["error"]["code"] == -32602 and says in error_of(answer), answer
    assert not PushConfig.objects.exists()


def test_oversized_fields_too_many_configs_and_a_huge_body_are_refused(alice, private_ok, receiver):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, private_ok, "write hello to a.txt")

    assert "token is at most 500" in error_of(create(token, str(task.pk), url=receiver.url, token="t" * 501))
    assert "id is at most 200" in error_of(create(token, str(task.pk), id="i" * 201, url=receiver.url))
    for number in range(push.MAX_CONFIGS_PER_TASK):
        assert "result" in create(token, str(task.pk), id=f"c{number}", url=receiver.url)
    assert "at most 10 push notification configs" in error_of(create(token, str(task.pk), id="one-more", url=receiver.url))
    huge = {"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig",
            "params": {"taskId": str(task.pk), "url": receiver.url, "token": "x" * MAX_BODY_BYTES}}
    assert call("POST", "/a2a/demo/", token=token, headers={"A2A-Version": "1.0"}, json=huge).status_code == 413
    assert PushConfig.objects.filter(task=task).count() == push.MAX_CONFIGS_PER_TASK


def test_garbage_configs_are_invalid_params_not_a_500(alice, agent):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, agent, "write hello to a.txt")
    for params in ({"taskId": str(task.pk), "url": 5}, {"taskId": str(task.pk), "url": {"a": 1}}, {"taskId": "nope", "url": "http://x/"},
                   {"taskId": str(task.pk), "url": "http://example.com/", "authentication": "basic"}, {}):
        answer = rpc(token, "CreateTaskPushNotificationConfig", params)
        assert "error" in answer and answer["error"]["code"] != -32603, (params, answer)
    assert not PushConfig.objects.exists()


# --- The notifications ---------------------------------------------------------------------------


def test_a_tasks_state_changes_are_posted_with_the_token_input_required_then_working_then_completed(alice, private_ok, receiver):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, private_ok, "write hello to a.txt")

    create(token, str(task.pk), url=receiver.url, token="secret")
    wait_until(lambda: receiver.states() == ["TASK_STATE_INPUT_REQUIRED"], message="the pause, as it stands when the config is set")
    [(sent_token, body)] = receiver.received
    assert sent_token == "secret" and body["task"]["id"] == str(task.pk)
    assert body["task"]["metadata"] == {"interrupt_type": "tool_approval"}

    rpc(token, "GetTask", {"id": str(task.pk)})  # this client is shown the pause (a push is not a read: it binds nothing)
    reply = {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk),
                         "parts": [{"data": {"type": "approval_response", "decision": "approved"}}]}}
    assert rpc(token, "SendMessage", reply)["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    wait_until(lambda: receiver.states()[-1:] == ["TASK_STATE_COMPLETED"], message="completed, posted")
    states = receiver.states("secret")
    # Working in between, unless the eager loop finished before anything looked (the e2e test sees it).
    assert states in (["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
                      ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]), states


def test_a_config_set_with_the_message_hears_the_task_from_its_start(alice, private_ok, receiver):
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "read a.txt"}]}
    configuration = {"taskPushNotificationConfig": {"url": receiver.url, "token": "from-the-start"}}

    answer = rpc(ApiToken.issue(alice), "SendMessage", {"message": message, "configuration": configuration})

    task = Task.objects.get(pk=answer["result"]["task"]["id"])
    assert PushConfig.objects.get(task=task).token == "from-the-start"
    wait_until(lambda: receiver.states()[-1:] == ["TASK_STATE_COMPLETED"], message="completed, posted")


def test_a_private_url_sent_with_a_message_refuses_the_message_and_starts_nothing(alice, agent):
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "write hello to a.txt"}]}
    configuration = {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}

    answer = rpc(ApiToken.issue(alice), "SendMessage", {"message": message, "configuration": configuration})

    assert "is a private address" in error_of(answer)
    assert not Task.objects.exists() and not PushConfig.objects.exists()


def test_a_receiver_that_fails_is_retried_a_few_times_then_left(alice, private_ok, monkeypatch):
    monkeypatch.setitem(push.deliver.app.conf, "task_eager_propagates", False)  # each eager retry runs, as a worker's would
    flaky, down = Receiver(statuses=(500, 503, 200)), Receiver(statuses=(500,))
    try:
        task = a2a_task(alice, private_ok, "write hello to a.txt")
        payload = json.dumps({"id": str(task.pk), "status": {"state": "TASK_STATE_WORKING"}})
        for receiver in (flaky, down):
            PushConfig.objects.create(task=task, config_id=receiver.url, owner=alice, url=receiver.url, token="t")
            # Eager Celery runs the retries at once (the worker backs off 1, 2, 4 s).
            push.deliver.apply((PushConfig.objects.get(url=receiver.url).pk, payload))
    finally:
        flaky.server.shutdown()
        down.server.shutdown()
    assert len(flaky.received) == 3  # two failures, then delivered
    assert len(down.received) == 1 + push.RETRIES  # then given up


def test_a_url_made_private_since_it_was_set_gets_nothing(alice, private_ok, receiver):
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    create(ApiToken.issue(alice), str(task.pk), url=receiver.url, token="t")
    wait_until(lambda: receiver.received, message="the first notification")
    private_ok.allow_private_fetch = False  # the operator takes the permission back
    private_ok.save(update_fields=["allow_private_fetch"])

    [approval] = pending_approvals(task.conversation)
    push.deliver.delay(PushConfig.objects.get().pk, '{"id": "%s"}' % task.pk)

    assert len(receiver.received) == 1


def test_a_cancel_is_posted_as_canceled(alice, private_ok, receiver):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    create(token, str(task.pk), url=receiver.url, token="t")

    assert rpc(token, "CancelTask", {"id": str(task.pk)})["result"]["status"]["state"] == "TASK_STATE_CANCELED"

    wait_until(lambda: receiver.states()[-1:] == ["TASK_STATE_CANCELED"], message="canceled, posted")


def test_a_working_task_is_looked_at_again_later_so_that_a_failure_without_a_signal_is_posted(alice, private_ok, receiver, monkeypatch):
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    create(ApiToken.issue(alice), str(task.pk), url=receiver.url, token="t")
    wait_until(lambda: receiver.received, message="the pause, posted")
    Conversation.objects.filter(pk=task.conversation_id).update(status=Conversation.Status.RUNNING)
    Approval.objects.filter(conversation_id=task.conversation_id).update(status=Approval.Status.APPROVED, decided_at=timezone.now())
    push.notify(str(task.pk))  # working: posted
    later = []
    monkeypatch.setitem(push.notify.app.conf, "task_always_eager", False)  # as in a worker: the look is queued, for later
    monkeypatch.setattr(push.notify, "apply_async", lambda args, kwargs, countdown: later.append((args, kwargs, countdown)))

    push._follow_later(str(task.pk), 0, moving=True)
    push._follow_later(str(task.pk), 0, moving=True)  # a second signal meanwhile: the chain already on it

    assert later == [((str(task.pk),), {"follow": 1}, 1)]
    monkeypatch.setitem(push.notify.app.conf, "task_always_eager", True)
    Conversation.objects.filter(pk=task.conversation_id).update(status=Conversation.Status.FAILED, error="model down")
    push.notify(str(task.pk), follow=1)  # the look: failed, posted; the chain ends
    wait_until(lambda: receiver.states()[-1:] == ["TASK_STATE_FAILED"], message="failed, posted")
    assert receiver.states() == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_FAILED"]
    assert len(later) == 1
