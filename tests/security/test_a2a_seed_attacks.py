"""A2A as the seeds' clients speak it (issue 29), attacked: push notification URLs that reach inside
(any spelling of loopback, private and link-local, names that resolve or rebind there, redirects,
userinfo, ports), receivers that hang, drip, answer without end or keep failing, configs of another
user's tasks, owners who lost the agent; seed 004's approval_response and kagent's extension with odd
decisions, odd edits, forged or huge ids, replies to a pause never seen, and replays. Every refusal is
a clear A2A error (never an internal error), decides nothing and loses nothing."""
import asyncio
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf.json_format import ParseDict

from a2a.types import a2a_pb2 as pb
from agentlink import decisions, push, runs
from agentlink.models import PushConfig, Task
from agentlink.runs import HITL_EXTENSION
from approvals.models import Approval
from chat.models import ApiToken
from tests.conftest import pending_approvals, wait_until
from tests.agentlink.a2a_client import a2a_task, call, message, refused, rpc, send, statuses
from tests.agentlink.test_agentlink_push import Receiver, create, error_of

pytestmark = pytest.mark.django_db(transaction=True)

RESPONSE = {"type": "approval_response"}
INVALID_PARAMS = -32602


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture
def private_ok(agent):
    agent.allow_private_fetch = True
    agent.save(update_fields=["allow_private_fetch"])
    return agent


def resolving(monkeypatch, table: dict[str, list[str]]) -> list[str]:
    """getaddrinfo answers names of `table` with its addresses (the rest as it would); returns the names asked."""
    real, asked = socket.getaddrinfo, []

    def fake(host, port, *args, **kwargs):
        asked.append(host)
        if host in table:
            return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in table[host]]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return asked


def config_for(task, url: str, owner) -> PushConfig:
    return PushConfig.objects.create(task=task, config_id=url[-50:], owner=owner, url=url, token="t")


def payload_of(task) -> str:
    return json.dumps({"id": str(task.pk), "status": {"state": "TASK_STATE_WORKING"}})


# --- SSRF: where a push may go -----------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    "http://2130706433/hook",            # 127.0.0.1 as one decimal number
    "http://0x7f000001/hook",            # ... in hex
    "http://0177.0.0.1/hook",            # ... in octal
    "http://127.1/hook",                 # ... shortened
    "http://0/hook", "http://0.0.0.0/hook", "http://[::]/hook",
    "http://LOCALHOST/hook", "http://127.0.0.1./hook", "http://localhost.:8080/hook",
    "http://[::1]/hook", "http://[0:0:0:0:0:0:0:1]/hook",
    "http://[::ffff:7f00:1]/hook", "http://[::ffff:169.254.169.254]/hook",  # IPv4-mapped
    "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of the metadata address
    "http://[fe80::1]/hook", "http://[fd00::1]/hook",
    "http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/hook", "http://192.168.1.1/hook", "http://172.16.0.1/hook",
    "https://10.0.0.1:443/hook",
    "http://evil.example@127.0.0.1/hook", "http://user:pass@localhost:8080/hook", "http://a\\@127.0.0.1/hook",
    "http://metadata.google.internal./hook",  # unresolvable here: refused all the same
    "gopher://127.0.0.1:6379/_INFO", "dict://127.0.0.1:11211/", "http:///hook", "http://[::1/hook",
])
def test_a_push_url_that_reaches_inside_in_any_spelling_is_refused(alice, agent, url):
    task = a2a_task(alice, agent, "write hello to a.txt")

    answer = create(ApiToken.issue(alice), str(task.pk), url=url, token="t")

    assert answer["error"]["code"] == INVALID_PARAMS and "refused" in error_of(answer).lower(), answer
    assert not PushConfig.objects.exists()


def test_a_name_resolving_to_a_private_address_is_refused_even_beside_a_public_one(alice, agent, monkeypatch):
    resolving(monkeypatch, {"push.example": ["93.184.216.34", "10.0.0.7"], "six.example": ["2606:4700::1", "::1"]})
    task = a2a_task(alice, agent, "write hello to a.txt")

    for url in ("http://push.example/hook", "http://six.example/hook"):
        assert "is a private address" in error_of(create(ApiToken.issue(alice), str(task.pk), url=url))
    assert not PushConfig.objects.exists()


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:25/hook", "is not for HTTP"), ("http://127.0.0.1:22/", "is not for HTTP"), ("http://[::1]:6667/", "is not for HTTP"),
    ("https://localhost:993/", "is not for HTTP"), ("http://[::1]:0/", "Port 0 is no TCP port"),
    ("http://127.0.0.1:99999/", "Port 99999 is no TCP port"), ("http://127.0.0.1:-1/", "no TCP port"),
])
def test_a_port_that_is_not_for_http_is_refused_even_where_private_addresses_are_allowed(alice, private_ok, url, says):
    task = a2a_task(alice, private_ok, "write hello to a.txt")

    assert says in error_of(create(ApiToken.issue(alice), str(task.pk), url=url))
    assert not PushConfig.objects.exists()


def test_a_name_that_rebinds_to_a_private_address_after_it_was_checked_gets_nothing(alice, agent, receiver, monkeypatch):
    port = receiver.server.server_port
    table = {"push.example": ["93.184.216.34"]}
    resolving(monkeypatch, table)
    task = a2a_task(alice, agent, "write hello to a.txt")
    with monkeypatch.context() as quiet:
        quiet.setattr(push.deliver, "delay", lambda *args: None)  # the first push would go to the public address
        assert "result" in create(ApiToken.issue(alice), str(task.pk), url=f"http://push.example:{port}/hook")
    table["push.example"] = ["127.0.0.1"]  # the name now points inside

    push.deliver.apply((PushConfig.objects.get().pk, payload_of(task)))

    assert receiver.received == []


def test_the_post_connects_to_the_checked_addresses_and_never_looks_the_name_up_again(alice, agent, receiver, monkeypatch):
    asked = resolving(monkeypatch, {})
    config = pb.TaskPushNotificationConfig(id="c", task_id="t", url=f"http://push.invalid:{receiver.server.server_port}/hook", token="s")

    assert asyncio.run(push._post(config, ParseDict({"id": "t"}, pb.Task()), ["127.0.0.1"])) is True

    assert [sent_token for sent_token, _ in receiver.received] == ["s"] and asked == []


class Answering:
    """A receiver on loopback whose answer `respond(handler)` writes (a redirect, nothing, a drip...)."""

    def __init__(self, respond):
        self.hits = 0
        answering = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                answering.hits += 1
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    respond(self)
                except OSError:  # we hung up on it: as meant
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def post(self, task) -> tuple[bool, float]:
        """push._post to it: whether it took it, and how long it took."""
        config = pb.TaskPushNotificationConfig(id="c", task_id=str(task.pk), url=self.url, token="t")
        started = time.monotonic()
        taken = asyncio.run(push._post(config, ParseDict({"id": str(task.pk)}, pb.Task()), ["127.0.0.1"]))
        return taken, time.monotonic() - started


@pytest.fixture
def answering():
    made = []

    def make(respond) -> Answering:
        made.append(Answering(respond))
        return made[-1]

    yield make
    for server in made:
        server.server.shutdown()
        server.server.server_close()


def test_a_redirect_is_not_followed_to_where_it_points(alice, agent, answering, receiver):
    def redirect(handler):
        handler.send_response(307)
        handler.send_header("Location", receiver.url)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    task = a2a_task(alice, agent, "write hello to a.txt")

    taken, _ = answering(redirect).post(task)

    assert taken is False and receiver.received == []  # a failure (retried), not a POST to the inside


def test_a_receiver_that_never_answers_or_drips_its_answer_holds_a_delivery_no_longer_than_its_deadline(alice, agent, answering, monkeypatch):
    monkeypatch.setattr(push, "POST_SECONDS", 1.0)
    done = threading.Event()

    def silent(handler):
        done.wait(30)

    def drip(handler):
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
            if done.wait(0.3):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()

    task = a2a_task(alice, agent, "write hello to a.txt")
    try:
        for respond in (silent, drip):
            taken, took = answering(respond).post(task)
            assert taken is False and took < 3, (respond.__name__, took)
    finally:
        done.set()


def test_an_answer_without_end_is_read_no_further_than_the_cap(alice, agent, answering, monkeypatch):
    monkeypatch.setattr(push, "POST_SECONDS", 5.0)
    sent_bytes = []

    def endless(handler):
        handler.send_response(200)
        handler.end_headers()  # no length: the body runs until the connection closes
        chunk = b"x" * 65536
        for _ in range(2000):  # 128 MiB, if anyone read it all
            handler.wfile.write(chunk)
            sent_bytes.append(len(chunk))

    task = a2a_task(alice, agent, "write hello to a.txt")

    taken, took = answering(endless).post(task)

    assert taken is True and took < 5  # its status said it took it; the rest was never read
    assert sum(sent_bytes) < 64 * 1024 * 1024


def test_a_state_superseded_by_a_newer_one_is_dropped_retries_and_all(alice, private_ok, receiver):
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    config = config_for(task, receiver.url, alice)
    older, newer = payload_of(task), json.dumps({"id": str(task.pk), "status": {"state": "TASK_STATE_COMPLETED"}})
    push.cache.set(push._latest_key(config.pk), push._digest(newer))  # notify queued the newer state meanwhile

    push.deliver.apply((config.pk, older))
    push.deliver.apply((config.pk, newer))

    assert receiver.states() == ["TASK_STATE_COMPLETED"]


def test_an_owner_deactivated_or_refused_the_agent_since_is_sent_nothing(alice, private_ok, receiver):
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    config = config_for(task, receiver.url, alice)

    private_ok.open_to_everyone = False  # access taken back
    private_ok.save(update_fields=["open_to_everyone"])
    push.deliver.apply((config.pk, payload_of(task)))
    private_ok.open_to_everyone = True
    private_ok.save(update_fields=["open_to_everyone"])
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    push.deliver.apply((config.pk, payload_of(task)))

    assert receiver.received == []
    alice.is_active = True
    alice.save(update_fields=["is_active"])
    push.deliver.apply((config.pk, payload_of(task)))
    assert len(receiver.received) == 1  # the same config, its owner back: sent


def test_the_push_carries_what_get_task_shows_the_owner_and_no_history(alice, private_ok, receiver):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, private_ok, "write hello to a.txt")

    create(token, str(task.pk), url=receiver.url, token="mine")
    wait_until(lambda: receiver.received, message="the pause, pushed")
    [(_, body)] = receiver.received

    shown = rpc(token, "GetTask", {"id": str(task.pk), "historyLength": 0})["result"]
    assert body["task"] == shown
    assert "history" not in body["task"] and "mine" not in json.dumps(body)  # the token goes in its header only


# --- Configs of a task not the caller's ----------------------------------------------------------------


def test_the_0_3_methods_keep_another_users_task_and_configs_out_of_reach(alice, mallory, private_ok, receiver):
    task = a2a_task(alice, private_ok, "write hello to a.txt")
    create(ApiToken.issue(alice), str(task.pk), url=receiver.url, token="alices")
    intruder = ApiToken.issue(mallory)

    for method, params in (
        ("tasks/pushNotificationConfig/set", {"taskId": str(task.pk), "pushNotificationConfig": {"url": receiver.url, "token": "m"}}),
        ("tasks/pushNotificationConfig/get", {"id": str(task.pk)}),
        ("tasks/pushNotificationConfig/list", {"id": str(task.pk)}),
        ("tasks/pushNotificationConfig/delete", {"id": str(task.pk), "pushNotificationConfigId": str(task.pk)}),
    ):
        answer = rpc(intruder, method, params, version=None)
        assert "error" in answer and answer["error"]["code"] != -32603, (method, answer)
        assert "alices" not in json.dumps(answer)
    assert list(PushConfig.objects.values_list("token", "owner")) == [("alices", alice.pk)]


def test_a_config_id_of_another_users_task_named_on_ones_own_task_finds_nothing(alice, mallory, private_ok, receiver):
    alices = a2a_task(alice, private_ok, "write hello to a.txt")
    create(ApiToken.issue(alice), str(alices.pk), id="shared-name", url=receiver.url, token="alices")
    mallorys = a2a_task(mallory, private_ok, "write hello to a.txt")
    intruder = ApiToken.issue(mallory)

    got = rpc(intruder, "GetTaskPushNotificationConfig", {"taskId": str(mallorys.pk), "id": "shared-name"})
    rpc(intruder, "DeleteTaskPushNotificationConfig", {"taskId": str(mallorys.pk), "id": "shared-name"})

    assert "not found" in error_of(got).lower() and "alices" not in json.dumps(got)
    assert rpc(intruder, "ListTaskPushNotificationConfigs", {"taskId": str(mallorys.pk)})["result"].get("configs", []) == []
    assert PushConfig.objects.get().token == "alices"


# --- Seed 004's approval_response, kagent's extension ---------------------------------------------------


@pytest.mark.parametrize("decision", ["Approved", "APPROVED", " approved", "approved ", "Approve", "approve ", "yes", "", True, 1, None, {"a": 1}])
def test_a_decision_in_another_case_spelling_or_type_is_refused_and_decides_nothing(alice, agent, decision):
    task = a2a_task(alice, agent, "write hello to a.txt")

    refusal = refused(task, alice, RESPONSE | {"decision": decision})

    assert '"decision" is "approved", "denied" or "modified".' in refusal.message
    assert statuses(task) == ["pending"]


@pytest.mark.parametrize("modified_input", ["{\"path\": \"b.txt\"}", 5, None, True, [], [{"path": "b.txt"}]])
def test_modified_input_that_is_not_an_object_is_refused_and_nothing_is_stored(alice, agent, modified_input):
    task = a2a_task(alice, agent, "write hello to a.txt")

    refusal = refused(task, alice, RESPONSE | {"decision": "modified", "modified_input": modified_input})

    assert '"modified" needs "modified_input"' in refusal.message
    [approval] = pending_approvals(task.conversation)
    assert approval.edited_arguments is None


def test_an_edit_of_a_critical_call_without_its_confirmation_decides_and_stores_nothing(alice, agent):
    task = a2a_task(alice, agent, "delete all files")
    [approval] = pending_approvals(task.conversation)

    refusal = refused(task, alice, RESPONSE | {"decision": "modified", "modified_input": dict(approval.tool_call.arguments)})
    garbage = refused(task, alice, RESPONSE | {"decision": "modified", "modified_input": {"note": "x"}, "confirmation": "DELETE"})

    assert f'is critical: approve it with "confirmation": "{approval.confirmation_hint}".' in refusal.message
    assert garbage.message.endswith("Extra inputs are not permitted. Nothing was decided.")  # the tool's words, a sentence
    approval.refresh_from_db()
    assert (approval.status, approval.edited_arguments) == ("pending", None)


@pytest.mark.parametrize("raw_id", [10**30, "9" * 40, 1e300, -1, 0, "1e3", "0x1", "١"])
def test_a_huge_negative_or_odd_id_is_a_clear_error_over_json_rpc(alice, agent, raw_id):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, agent, "write hello to a.txt")
    reply = {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk),
             "parts": [{"data": RESPONSE | {"decision": "approved", "id": raw_id}}]}

    answer = rpc(token, "SendMessage", {"message": reply})

    assert answer["error"]["code"] == INVALID_PARAMS, answer
    assert statuses(task) == ["pending"]


def test_a_reply_from_a_client_that_never_saw_the_pause_decides_nothing(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")  # shown to another client (the handler's own)
    stranger = ApiToken.issue(alice)  # a second program of the same user, that never read the task
    reply = {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk), "parts": [{"data": RESPONSE | {"decision": "approved"}}]}

    answer = rpc(stranger, "SendMessage", {"message": reply})

    assert answer["error"]["code"] == INVALID_PARAMS and "listed none of the pending calls" in error_of(answer)
    assert statuses(task) == ["pending"]


def kagent_reply(*approvals_json) -> pb.Message:
    reply = message("Approve")
    reply.extensions.append(HITL_EXTENSION)
    reply.metadata.update({HITL_EXTENSION: {"type": "tool_approval_response", "approvals": list(approvals_json)}})
    return reply


def test_kagents_reply_naming_another_conversations_approval_is_refused_and_touches_neither(alice, mallory, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    other_of_alice = a2a_task(alice, agent, "delete a.txt")
    of_mallory = a2a_task(mallory, agent, "delete a.txt")

    for other in (other_of_alice, of_mallory):
        [forged] = pending_approvals(other.conversation)
        with pytest.raises(decisions.Refused) as caught:
            decisions.apply(conversation=task.conversation, user=alice, message=kagent_reply({"id": str(forged.pk), "approved": True}),
                            pending=runs.read(task).pending, shown=runs.shown_to_client(task))
        assert "is not one of this task's pending calls" in caught.value.message
    assert set(Approval.objects.values_list("status", flat=True)) == {"pending"}


def test_a_reply_naming_another_users_decided_approval_does_not_say_who_decided_it(alice, mallory, bob, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    of_mallory = a2a_task(mallory, agent, "delete a.txt")
    [theirs] = pending_approvals(of_mallory.conversation)
    assert send(of_mallory, mallory, {"decision_type": "deny"}) == 1

    refusal = refused(task, alice, RESPONSE | {"decision": "approved", "id": theirs.pk})

    assert "is not one of this task's pending calls" in refusal.message and "mallory" not in refusal.message


def test_a_replayed_reply_after_the_decision_names_who_decided_and_decides_nothing_more(alice, agent, settings):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, agent, "write hello to a.txt")
    rpc(token, "GetTask", {"id": str(task.pk)})
    [approval] = pending_approvals(task.conversation)
    by_id = {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk),
             "parts": [{"data": RESPONSE | {"decision": "approved", "id": approval.pk}}]}
    assert rpc(token, "SendMessage", {"message": by_id})["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    written = (settings.HITL_SANDBOX_ROOT / str(task.conversation_id) / "a.txt").stat().st_mtime_ns

    replayed = rpc(token, "SendMessage", {"message": by_id})
    blanket = rpc(token, "SendMessage", {"message": by_id | {"parts": [{"data": RESPONSE | {"decision": "denied"}}]}})
    extension = rpc(token, "SendMessage", {"message": by_id | {"parts": [{"text": "Approve"}], "extensions": [HITL_EXTENSION],
                    "metadata": {HITL_EXTENSION: {"type": "tool_approval_response", "approvals": [{"id": str(approval.pk), "approved": False}]}}}})

    assert f"Approval #{approval.pk} was already approved by alice via a2a" in error_of(replayed)
    assert "takes no decision now" in error_of(blanket)
    assert f"Approval #{approval.pk} was already approved by alice via a2a" in error_of(extension)
    assert all(answer["error"]["code"] != -32603 for answer in (replayed, blanket, extension))
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert (settings.HITL_SANDBOX_ROOT / str(task.conversation_id) / "a.txt").stat().st_mtime_ns == written  # ran once


def test_a_refused_reply_on_a_stream_is_an_error_event_that_ends_the_stream(alice, agent):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, agent, "write hello to a.txt")
    reply = {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk), "parts": [{"data": RESPONSE | {"decision": "APPROVED"}}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": reply}}

    response = call("POST", "/a2a/demo/", token=token, headers={"A2A-Version": "1.0"}, json=body)

    events = [json.loads(line[len("data:"):]) for line in response.text.splitlines() if line.startswith("data:")]
    [event] = events or [response.json()]  # the SDK answers an error before the first event as plain JSON: nothing left open
    assert event["error"]["code"] == INVALID_PARAMS and '"decision" is "approved"' in event["error"]["message"]
    assert statuses(task) == ["pending"]


@pytest.mark.parametrize("field, says", [
    ({"token": "se\r\ncret"}, "token is visible ASCII"),
    ({"token": "s\u00e9cret"}, "token is visible ASCII"),
    ({"token": "a\u0000b"}, "token is visible ASCII"),
    ({"authentication": {"scheme": "Bearer\r\nX-Evil: 1", "credentials": "c"}}, "authentication scheme is visible ASCII"),
    ({"authentication": {"scheme": "Bearer", "credentials": "c\nX-Evil: 1"}}, "authentication credentials is visible ASCII"),
    ({"id": "a\u0000b"}, "hold no NUL"),
    ({"url": "http://push.example/a\u0000b"}, "hold no NUL"),
    ({"url": "http://user:pw@push.example/hook"}, "carries no user:password@"),
])
def test_a_config_whose_fields_would_break_every_send_or_hide_credentials_is_refused(alice, agent, monkeypatch, field, says):
    resolving(monkeypatch, {"push.example": ["93.184.216.34"]})
    task = a2a_task(alice, agent, "write hello to a.txt")

    answer = create(ApiToken.issue(alice), str(task.pk), **({"url": "http://push.example/hook", "token": "t"} | field))

    assert answer["error"]["code"] == INVALID_PARAMS and says in error_of(answer), answer
    assert not PushConfig.objects.exists()


def test_a_reply_carrying_one_config_too_many_is_refused_before_it_decides_anything(alice, agent, monkeypatch):
    resolving(monkeypatch, {"push.example": ["93.184.216.34"]})
    monkeypatch.setattr(push.deliver, "delay", lambda *args: None)
    token = ApiToken.issue(alice)
    task = a2a_task(alice, agent, "write hello to a.txt")
    rpc(token, "GetTask", {"id": str(task.pk)})
    for number in range(push.MAX_CONFIGS_PER_TASK):
        create(token, str(task.pk), id=f"c{number}", url="http://push.example/hook")
    reply = {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk), "parts": [{"data": RESPONSE | {"decision": "approved"}}]}
    configuration = {"taskPushNotificationConfig": {"id": "one-more", "url": "http://push.example/hook"}}

    answer = rpc(token, "SendMessage", {"message": reply, "configuration": configuration})

    assert "at most 10 push notification configs" in error_of(answer)
    assert statuses(task) == ["pending"] and PushConfig.objects.count() == push.MAX_CONFIGS_PER_TASK


@pytest.mark.parametrize("reply", [
    RESPONSE | {"decision": "denied", "id": "{id}"},
    {"decisions": [{"id": "{id}", "decision_type": "deny"}]},
    {"type": "tool_approval_response", "approvals": [{"id": "{id}", "approved": False}]},
])
def test_denying_a_question_by_id_is_refused_before_anything_is_decided(alice, agent, reply):
    task = a2a_task(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(task.conversation)

    refusal = refused(task, alice, json.loads(json.dumps(reply).replace('"{id}"', str(question.pk))))

    assert refusal.message == (f'Approval #{question.pk} is a question: answer it with {{"answers": [{{"id": {question.pk}, "answer": …}}]}}, '
                               f'or decline it with {{"answers": [{{"id": {question.pk}, "decline": true}}]}}.')
    assert statuses(task) == ["pending"]


def test_kagents_reply_without_a_task_starts_nothing(alice, agent):
    token = ApiToken.issue(alice)
    reply = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "Approve"}], "extensions": [HITL_EXTENSION],
             "metadata": {HITL_EXTENSION: {"type": "tool_approval_response", "approvals": [{"id": "1", "approved": True}]}}}

    answer = rpc(token, "SendMessage", {"message": reply})

    assert answer["error"]["code"] == INVALID_PARAMS and "decisions go to the task that asked for them" in error_of(answer)
    assert not Approval.objects.exists() and not Task.objects.exists()


@pytest.mark.parametrize("mixed", [
    {"decision_type": "deny", "decision": "approved"},
    {"decisions": [{"id": "{id}", "decision_type": "deny"}], "decision": "approved"},
    RESPONSE | {"decision": "approved", "approvals": [{"id": "{id}", "approved": False}]},
])
def test_a_data_part_mixing_two_shapes_is_refused_rather_than_read_one_way(alice, agent, mixed):
    task = a2a_task(alice, agent, "write hello to a.txt")
    [approval] = pending_approvals(task.conversation)

    refusal = refused(task, alice, json.loads(json.dumps(mixed).replace('"{id}"', str(approval.pk))))

    assert refusal.message.startswith("A data part has one shape: this one has")
    assert statuses(task) == ["pending"]


@pytest.mark.parametrize("method", ["GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"])
def test_a_config_id_with_a_nul_is_not_found_not_an_internal_error(alice, agent, method):
    task = a2a_task(alice, agent, "write hello to a.txt")

    answer = rpc(ApiToken.issue(alice), method, {"taskId": str(task.pk), "id": "a\u0000b"})

    assert answer.get("error", {}).get("code") != -32603, answer  # PostgreSQL refused the NUL in the query: a DataError


@pytest.mark.parametrize("text, reply", [
    ("write hello to a.txt", RESPONSE | {"decision": "denied", "reason": "not \u0000 that"}),
    ("write hello to a.txt", RESPONSE | {"decision": "approved", "confirmation": "\u0000", "shown_hash": "\u0000"}),
    ("ask me what to call the file", {"answers": [{"id": "{id}", "answer": "a\u0000b"}]}),
    ("ask me what to call the file", {"answers": [{"id": "{id}", "decline": True, "reason": "\u0000"}]}),
])
def test_a_nul_in_a_reason_answer_or_hash_is_no_internal_error(alice, agent, text, reply):
    token = ApiToken.issue(alice)
    task = a2a_task(alice, agent, text)
    rpc(token, "GetTask", {"id": str(task.pk)})
    [approval] = pending_approvals(task.conversation)
    data = json.loads(json.dumps(reply).replace('"{id}"', str(approval.pk)))

    answer = rpc(token, "SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m2", "taskId": str(task.pk), "parts": [{"data": data}]}})

    assert answer.get("error", {}).get("code") != -32603, answer
    approval.refresh_from_db()
    assert "\u0000" not in (approval.rejection_reason or "") + json.dumps(approval.answer)


@pytest.mark.parametrize("params", [
    {"message": {"role": "ROLE_USER", "messageId": "m\u0000", "parts": [{"text": "hello \u0000 there"}]}},
    {"message": {"role": "ROLE_USER", "messageId": "m1", "contextId": "\u0000", "parts": [{"text": "hello"}]}},
    {"message": {"role": "ROLE_USER", "messageId": "m1", "taskId": "\u0000", "parts": [{"text": "hello"}]}},
    {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hello"}]},
     "configuration": {"taskPushNotificationConfig": {"id": "\u0000", "url": "http://push.example/"}}},
])
def test_a_nul_anywhere_in_a_new_message_is_no_internal_error(alice, agent, params):
    answer = rpc(ApiToken.issue(alice), "SendMessage", params)

    assert answer.get("error", {}).get("code") != -32603, answer


def test_looking_at_a_task_again_and_again_sends_each_state_once_per_config(alice, agent, monkeypatch):
    task = a2a_task(alice, agent, "write hello to a.txt")
    for number in range(push.MAX_CONFIGS_PER_TASK):
        config_for(task, f"http://push.example/{number}", alice)
    queued = []
    monkeypatch.setattr(push.deliver, "delay", lambda *args: queued.append(args))

    for _ in range(5):  # a burst of signals: messages, votes, reminders
        push.notify(str(task.pk))

    assert len(queued) == push.MAX_CONFIGS_PER_TASK and len({payload for _, payload in queued}) == 1
