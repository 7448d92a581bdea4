"""Web Push end to end: a stack of its own (redis-server, daphne, beat and a Celery worker, on the
session stack's database and VAPID key) whose worker pushes through pywebpush to a local push
service (tests/standins/fake_push.py), which checks the VAPID signature and decrypts each notification with
the subscription's keys. A test plays the browser: it logs in, reads the VAPID key from the profile
page, stores a subscription with its session and CSRF token, and presses an action as the service
worker does (POST /push/decide with the token), or fills the reject form a notification's Reject opens."""
import re
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from approvals.models import Approval
from pushlink.models import PushNotification, PushSubscription
from tests.conftest import wait_until
from tests.e2e.browser import _store_password_for_the_server
from tests.e2e.channels.conftest import ChannelStack, after_the_test, approval_of, start_on, start_parts, wait_for_parts
from tests.e2e.conftest import Api, free_port, status_of
from tests.standins.fake_push import FakePush

pytestmark = pytest.mark.e2e


class PushStack(ChannelStack):
    def __init__(self, base_url: str, fake: FakePush, processes: dict):
        self.base_url, self.fake, self.processes = base_url, fake, processes


@pytest.fixture(scope="module")
def push_stack(stack, tmp_path_factory):
    """A stack of its own on the session stack's environment: the same database and var directory,
    so the same VAPID key. The two are one site: the session stack's beat may warn first and its
    worker push the warning, which a push service takes only if it is signed with that site's key."""
    work = tmp_path_factory.mktemp("push")
    redis_port, web_port = free_port(), free_port()
    env = stack.env | {
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "HITL_DELIVERY_SWEEP_SECONDS": "1",
        "HITL_PUSH_STALE_SECONDS": "2",
        "HITL_PUSH_TIMEOUT": "3",
        "HITL_EXPIRY_SWEEP_SECONDS": "1",
        "HITL_BASE_URL": f"http://127.0.0.1:{web_port}",
    }
    processes = {}
    with FakePush() as fake:
        start_parts(processes, "push", env, work, redis_port, web_port)
        stack = PushStack(f"http://127.0.0.1:{web_port}", fake, processes)
        try:
            wait_for_parts(processes, web_port)
            yield stack
        finally:
            for process in reversed(processes.values()):
                process.stop()


@pytest.fixture
def push(push_stack, transactional_db):
    push_stack.fake.received.clear()
    push_stack.fake.gone.clear()
    yield push_stack
    after_the_test(push_stack)


class Browser:
    """What a browser does on the site: log in with the real form, turn notifications on."""

    def __init__(self, push: PushStack, user):
        self.push, self.user = push, user
        self.http = httpx.Client(base_url=push.base_url, timeout=10, follow_redirects=False)
        _store_password_for_the_server(user, f"{user.username}-password")
        self.http.get("/accounts/login/")
        form = {"username": user.username, "password": f"{user.username}-password",
                "csrfmiddlewaretoken": self.http.cookies["csrftoken"]}
        assert self.http.post("/accounts/login/", data=form).status_code == 302

    def turn_on_notifications(self) -> dict:
        page = self.http.get("/profile/").text
        key = re.search(r'data-vapid-key="([^"]+)"', page).group(1)
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        subscription = self.push.fake.subscribe(key)
        response = self.http.post("/push/subscriptions", json=subscription, headers={"X-CSRFToken": csrf})
        assert response.status_code == 201, response.text
        return subscription


def devices(push, *users) -> dict:
    return {user.username: Browser(push, user).turn_on_notifications() for user in users}


def notifications(push, device: dict, approval: Approval, kind: str = "request") -> list[dict]:
    return [m for m in push.fake.messages(device["endpoint"]) if m["approval_id"] == approval.pk and m["type"] == kind]


def notified(push, device: dict, approval: Approval, kind: str = "request", count: int = 1) -> dict:
    return wait_until(lambda: len(notifications(push, device, approval, kind)) >= count and notifications(push, device, approval, kind)[-1],
                      timeout=20, message=f"the {kind} notification\n{push.logs()}")


def press(push, token: str, decision: str, **extra) -> httpx.Response:
    """As the service worker does: no cookies, the token is the proof."""
    return httpx.post(f"{push.base_url}/push/decide", json={"token": token, "decision": decision, **extra}, timeout=10)


def test_approving_from_the_notification_resumes_the_run_and_replaces_it_with_the_outcome(push, alice, bob, agent):
    browser = Browser(push, alice)
    phone = browser.turn_on_notifications()
    conversation_id = start_on(push, alice, "write hello to a.txt")
    approval = approval_of(conversation_id)
    shown = notified(push, phone, approval)
    assert shown["title"] == "Approve? · medium risk" and shown["body"].startswith("Write a.txt (5 bytes) — asked by alice (Demo agent)")
    assert '"content": "hello"' in shown["body"] and shown["complete"] is True
    assert shown["url"] == f"{push.base_url}/conversations/{conversation_id}/#tool-call-{approval.tool_call_id}"

    response = press(push, shown["tokens"]["approve"], "approve")

    assert (response.status_code, response.json()["outcome"]) == (200, "approved")
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "push", alice)
    decided = notified(push, phone, approval, "decided")
    assert decided["tag"] == shown["tag"] and decided["body"].startswith("Approved by alice via push")
    wait_until(lambda: PushNotification.objects.get(approval=approval).status == "closed", message="closed")
    assert "by alice via push" in browser.http.get(f"/conversations/{conversation_id}/").text  # the card says how
    assert '<td data-label="Via">push</td>' in Browser(push, bob).http.get("/approvals/history/").text  # an approver's history


def test_rejecting_with_a_reason_through_the_form_the_notification_opens(push, alice, agent):
    phone = devices(push, alice)["alice"]
    conversation_id = start_on(push, alice, "write hello to a.txt")
    approval = approval_of(conversation_id)
    shown = notified(push, phone, approval)
    form = httpx.Client(base_url=push.base_url, timeout=10)  # the window the service worker opens, logged in or not
    page = form.get("/push/reject/")  # the token rides in the #fragment: never in a request line
    assert page.status_code == 200 and 'name="reason"' in page.text
    called = form.post("/push/reject/call", json={"token": shown["tokens"]["reject"]}).json()
    assert (called["state"], called["sentence"]) == ("form", "Write a.txt (5 bytes)")
    assert Approval.objects.get(pk=approval.pk).status == "pending"  # opening the form decided nothing

    response = form.post("/push/reject/", data={"token": shown["tokens"]["reject"], "reason": "wrong file",
                                                "csrfmiddlewaretoken": form.cookies["csrftoken"]})

    assert response.status_code == 200 and "Rejected by alice via push" in response.text
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason, approval.decided_via) == ("rejected", "wrong file", "push")
    assert notified(push, phone, approval, "decided")["body"].endswith(": wrong file")


def test_a_call_too_long_for_the_notification_is_approved_on_the_site_after_a_warning_and_an_extend(push, alice, agent):
    """The attack of issue 35 on the real stack: a cut notification's token cannot approve."""
    browser = Browser(push, alice)
    phone = browser.turn_on_notifications()
    conversation_id = start_on(push, alice, "write " + "x" * 400 + " to setup.sh")
    approval = approval_of(conversation_id)
    shown = notified(push, phone, approval)
    assert "(Cut: open hitl to see the whole call and approve it.)" in shown["body"] and shown["complete"] is False
    assert [a["action"] for a in shown["actions"]] == ["open", "reject", "view"] and set(shown["tokens"]) == {"reject"}

    forged = press(push, shown["tokens"]["reject"], "approve")

    assert (forged.status_code, forged.json()["outcome"]) == (409, "decide on the site")
    assert "open the site" in forged.json()["message"] and Approval.objects.get(pk=approval.pk).status == "pending"

    # The deadline nears: the beat's sweep warns this device once, in place of the request.
    soon = timezone.now()
    Approval.objects.filter(pk=approval.pk).update(expires_at=soon + timedelta(minutes=10), warn_at=soon)
    warned = notified(push, phone, approval, "warning")
    assert warned["tag"] == shown["tag"] and warned["title"].startswith("Expires at ") and warned["title"].endswith("UTC: Write setup.sh (400 bytes)")
    extended = httpx.post(f"{push.base_url}/push/extend", json={"token": warned["tokens"]["extend"]}, timeout=10)
    assert (extended.status_code, extended.json()["outcome"]) == (200, "extended"), extended.text
    again = notified(push, phone, approval, count=2)  # the request again, in place of the warning
    assert again["tag"] == shown["tag"] and Approval.objects.get(pk=approval.pk).extended_by == alice
    assert len(notifications(push, phone, approval, "warning")) == 1

    # On the site the card shows the whole call, and approves it.
    assert "x" * 400 in browser.http.get(f"/conversations/{conversation_id}/").text
    approval.refresh_from_db()
    decided = browser.http.post(f"/approvals/{approval.pk}/decide/", data={"decision": "approve", "shown_hash": approval.shown_hash},
                                headers={"X-CSRFToken": browser.http.cookies["csrftoken"], "HX-Request": "true"})  # as the card's button
    assert decided.status_code == 200 and "Approved" in decided.text, decided.text
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "chat")
    assert notified(push, phone, approval, "decided")["body"].startswith("Approved by alice via chat")


def test_a_late_press_after_the_api_decided_is_told_who_decided_and_changes_nothing(push, alice, agent):
    phone = devices(push, alice)["alice"]
    conversation_id = start_on(push, alice, "write hello to a.txt")
    approval = approval_of(conversation_id)
    shown = notified(push, phone, approval)
    decided = Api(push.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "no", "shown_hash": approval.shown_hash})
    assert decided.status_code == 200, decided.text
    notified(push, phone, approval, "decided")  # the notification is replaced at once

    response = press(push, shown["tokens"]["approve"], "approve")

    assert response.status_code == 409
    assert response.json()["message"].startswith("Too late: Rejected by alice via api")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


def test_a_tampered_token_is_refused_and_decides_nothing(push, alice, agent):
    phone = devices(push, alice)["alice"]
    approval = approval_of(start_on(push, alice, "write hello to a.txt"))
    token = notified(push, phone, approval)["tokens"]["approve"]

    for forged in (token[:-3] + "xyz", token.split(":")[0], "garbage"):
        assert press(push, forged, "approve").status_code == 403
    assert press(push, token, "launch").status_code == 400
    assert httpx.post(f"{push.base_url}/push/decide", content=b"\xff", timeout=10).status_code == 400

    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_edit_after_sending_voids_the_old_actions_and_sends_the_new_version(push, alice, agent):
    phone = devices(push, alice)["alice"]
    approval = approval_of(start_on(push, alice, "write hello to a.txt"))
    old = notified(push, phone, approval)
    edit = {"decision": "approve", "shown_hash": approval.shown_hash, "arguments": {"path": "b\u200b.txt", "content": "hello"}}
    assert Api(push.base_url, alice).post(f"approvals/{approval.pk}/decision", edit).json()["status"] == "pending"

    new = notified(push, phone, approval, count=2)

    # The edit made it high risk: its notification says the sentence only, so it can reject, never approve.
    assert "⟨U+200B⟩" in new["body"] and new["tag"] == old["tag"] and set(new["tokens"]) == {"reject"}
    assert press(push, old["tokens"]["approve"], "approve").json()["outcome"] == "changed"
    assert press(push, new["tokens"]["reject"], "approve").json()["outcome"] == "decide on the site"
    assert press(push, new["tokens"]["reject"], "reject", reason="not that file").status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.rejection_reason) == ("rejected", "not that file")


def test_a_critical_call_offers_view_only(push, alice, agent):
    phone = devices(push, alice)["alice"]
    approval = approval_of(start_on(push, alice, "delete all files"))

    shown = notified(push, phone, approval)

    assert [action["action"] for action in shown["actions"]] == ["view"] and shown["tokens"] == {}
    assert "critical" in shown["title"]


def test_a_four_eyes_call_reaches_only_the_eligible_approvers(push, alice, bob, carol, mallory, ops_agent):
    phones = devices(push, alice, bob, carol, mallory)
    approval = approval_of(start_on(push, alice, "delete a.txt", agent="ops"))
    assert approval.approver_required

    for name in ("bob", "carol"):
        assert [a["action"] for a in notified(push, phones[name], approval)["actions"]] == ["view"]
    wait_until(lambda: PushNotification.objects.filter(approval=approval, status="sent").count() == 2, message="both sent")
    assert not notifications(push, phones["alice"], approval) and not notifications(push, phones["mallory"], approval)
    assert sorted(PushNotification.objects.filter(approval=approval).values_list("user__username", flat=True)) == ["bob", "carol"]


def test_a_push_service_down_then_back_delivers_each_notification_once(push, alice, agent):
    phone = devices(push, alice)["alice"]
    push.fake.stop()
    try:
        approval = approval_of(start_on(push, alice, "write hello to a.txt"))
        row = wait_until(lambda: PushNotification.objects.filter(approval=approval).exclude(last_error="").first(), timeout=20,
                         message=f"a failed send\n{push.logs()}")
        assert row.status == "queued" and "ConnectionError" in row.last_error
    finally:
        push.fake.start()

    shown = notified(push, phone, approval)
    wait_until(lambda: PushNotification.objects.get(approval=approval).status == "sent", message="sent")
    # The task's retry and the beat sweep both ran once the service was back: one of them sent it.
    assert press(push, shown["tokens"]["approve"], "approve").status_code == 200
    notified(push, phone, approval, "decided")
    assert len(notifications(push, phone, approval)) == 1


def test_a_device_the_push_service_forgot_is_removed(push, alice, agent):
    phone = devices(push, alice)["alice"]
    push.fake.gone.add(phone["endpoint"].rsplit("/", 1)[-1])

    approval = approval_of(start_on(push, alice, "write hello to a.txt"))

    wait_until(lambda: not PushSubscription.objects.filter(endpoint=phone["endpoint"]).exists(), timeout=20, message="the device removed")
    # The device goes first, then its failure is recorded on the row (CI read the row in between once).
    row = wait_until(lambda: PushNotification.objects.filter(approval=approval, status="failed").first(), timeout=10,
                     message="its notification failed with the push service's answer")
    assert "410" in row.last_error
