"""The push opt-in in Chromium on the real stack: the profile page's button registers the service
worker at /sw.js (scope /), asks for permission (granted to the context, as a person would) and
stores the subscription with the session's CSRF token; the device is listed and removed.

Headless Chromium offline has no push service to subscribe with (its own is Google's FCM), so the
page's `PushManager.prototype.subscribe` alone is stubbed by an init script: it answers with a
subscription the local push service (tests/standins/fake_push.py) made for the site's VAPID key. Everything
else is real: the worker then pushes a request through pywebpush to that push service, which
decrypts it; the decrypted payload is delivered to the registered service worker over the DevTools
protocol (ServiceWorker.deliverPushMessage), and the notification it shows is read back.

A notification's click is the browser's own event: headless Chromium shows no notification to
click, so the test takes the very notification the worker showed (registration.getNotifications()
in the worker) and dispatches the `notificationclick` the browser would, with the action pressed,
on the worker. The worker's handler then does what it does for a person: Approve POSTs its token,
Reject opens the reject form, which the test fills in the page it opened.

HITL_PUSH_SHOTS=<directory> also saves what the notifications said (text, and drawn as a page) and
the reject form at 1280 and 390 px."""
import json
import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from approvals.models import Approval
from pushlink.models import PushSubscription
from tests.conftest import wait_until
from tests.e2e.browser import browser, log_in, new_page, page  # noqa: F401  (fixtures)
from tests.e2e.conftest import Api
from tests.standins.fake_push import FakePush

pytestmark = pytest.mark.e2e

STUB_SUBSCRIBE = """
(() => {
  const made = %s;
  PushManager.prototype.subscribe = async function (options) {
    window.__subscribedWith = options && options.applicationServerKey ? options.applicationServerKey.byteLength : 0;
    return { endpoint: made.endpoint, expirationTime: null, toJSON: () => made };
  };
})();
"""


WORKER_STATE = (
    "navigator.serviceWorker.getRegistration('/').then(r => r ? {active: r.active && r.active.state, "
    "waiting: !!r.waiting, installing: !!r.installing, permission: Notification.permission} : null)"
)


CLICK = """async ([tag, action]) => {
  const [notification] = await self.registration.getNotifications({ tag });
  if (!notification) return false;
  self.dispatchEvent(new NotificationEvent("notificationclick", { notification, action }));
  return true;
}"""
SHOWN = (
    "navigator.serviceWorker.getRegistration('/').then(r => r.getNotifications())"
    ".then(ns => ns.map(n => ({title: n.title, body: n.body, tag: n.tag, actions: n.actions.map(a => a.title)})))"
)
SHOTS = os.environ.get("HITL_PUSH_SHOTS", "")


@pytest.fixture
def fake_push():
    with FakePush() as push:
        yield push


def test_turning_notifications_on_registers_the_service_worker_and_stores_this_devices_subscription(page, e2e, alice, agent, fake_push):  # noqa: F811
    page.context.grant_permissions(["notifications"], origin=e2e.base_url)
    log_in(page, alice)
    page.goto("/profile/")
    section = page.locator("#push")
    expect(section.get_by_text("No device gets notifications yet.")).to_be_visible()
    key = section.locator("#push-optin").get_attribute("data-vapid-key")
    subscription = fake_push.subscribe(key)
    page.context.add_init_script(STUB_SUBSCRIBE % json.dumps(subscription))
    page.reload()

    page.get_by_role("button", name="Turn on notifications on this device").click()

    expect(section.get_by_role("button", name=re.compile("^Remove Chrome"))).to_be_visible()
    stored = PushSubscription.objects.get(user=alice)
    assert (stored.endpoint, stored.p256dh, stored.auth) == (subscription["endpoint"], subscription["keys"]["p256dh"], subscription["keys"]["auth"])
    assert page.evaluate("window.__subscribedWith") is None  # the page reloaded after storing it
    worker = page.evaluate("navigator.serviceWorker.getRegistration('/').then(r => r && r.active && [r.active.scriptURL, r.scope])")
    assert worker == [f"{e2e.base_url}/sw.js", f"{e2e.base_url}/"]

    # A request reaches the push service, decrypted there; delivered to this browser's worker, it
    # is shown with its actions.
    registrations = []
    cdp = page.context.new_cdp_session(page)
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
    cdp.send("ServiceWorker.enable")
    conversation = Api(e2e.base_url, alice).post("conversations", {"agent": "demo", "message": "write hello to a.txt"}).json()
    approval = wait_until(lambda: Approval.objects.filter(conversation_id=conversation["id"]).first(), timeout=20, message="the approval")
    payload = wait_until(lambda: next(iter(fake_push.messages(subscription["endpoint"])), None), timeout=20, message=f"the push\n{e2e.logs()}")
    assert payload["approval_id"] == approval.pk
    wait_until(lambda: page.evaluate("1") and registrations, timeout=10, message="the worker's registration id")  # evaluate: events arrive
    (registration_id,) = {r["registrationId"] for r in registrations if r["scopeURL"] == f"{e2e.base_url}/"}

    def deliver(payload: dict) -> dict:
        """The push to this browser's worker; the notification it shows."""
        delivered = []

        def shown_notification():
            # DevTools' injected push is the browser's stand-in for its push service, and under load
            # (seen once in CI) one may be dropped before the worker wakes: inject it again every two
            # seconds until shown. Tagged by approval, a second showing replaces the first.
            if not delivered or time.monotonic() - delivered[-1] > 2:
                cdp.send("ServiceWorker.deliverPushMessage", {"origin": e2e.base_url, "registrationId": registration_id, "data": json.dumps(payload)})
                delivered.append(time.monotonic())
            return next((n for n in page.evaluate(SHOWN) if n["tag"] == payload["tag"] and n["title"] == payload["title"]), None)

        try:
            return wait_until(shown_notification, timeout=20, message="the notification")
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}: {len(delivered)} pushes delivered to registration {registration_id}; registrations seen: "
                f"{registrations}; worker: {page.evaluate(WORKER_STATE)}"
            ) from None

    shown = deliver(payload)
    assert shown["title"] == "Approve? · medium risk" and shown["tag"] == f"approval-{approval.pk}"
    assert shown["actions"] == ["Approve", "Reject…"]  # Chromium shows two actions; a tap is View
    assert shown["body"].startswith("Write a.txt (5 bytes) — asked by alice (Demo agent)") and '"content": "hello"' in shown["body"]
    said = [shown]

    # Approve, pressed on the notification: the worker POSTs its token and shows the outcome.
    (worker,) = [w for w in page.context.service_workers if w.url == f"{e2e.base_url}/sw.js"]
    assert worker.evaluate(CLICK, [shown["tag"], "approve"])
    wait_until(lambda: Approval.objects.get(pk=approval.pk).status == "approved", timeout=20, message=f"approved\n{e2e.logs()}")
    approved = Approval.objects.get(pk=approval.pk)
    assert (approved.decided_by, approved.decided_via) == (alice, "push")
    outcome = wait_until(lambda: next((n for n in page.evaluate(SHOWN) if n["tag"] == shown["tag"]), None), timeout=10, message="the outcome")
    assert outcome["title"] == "Approved." and outcome["actions"] == []

    # Reject, pressed on the next one: the worker opens the reject form, which asks why.
    second = Api(e2e.base_url, alice).post("conversations", {"agent": "demo", "message": "write bye to b.txt"}).json()
    other = wait_until(lambda: Approval.objects.filter(conversation_id=second["id"]).first(), timeout=20, message="the second approval")
    pushed = wait_until(lambda: next((m for m in fake_push.messages(subscription["endpoint"]) if m["approval_id"] == other.pk), None),
                        timeout=20, message="the second push")
    said.append(deliver(pushed))
    assert worker.evaluate(CLICK, [pushed["tag"], "reject"])
    # Chromium opens no new window for a click it did not see a person make, so the worker shows
    # the form in the site's open tab (its fallback); a person's click opens a window with it.
    form = page
    form.wait_for_url(re.compile(r"/push/reject/$"), timeout=20_000)
    expect(form.get_by_text("Write b.txt (3 bytes)")).to_be_visible()
    expect(form.get_by_text("asked by alice (Demo agent)", exact=False)).to_be_visible()
    assert "#" not in form.url  # the token left the address bar
    assert Approval.objects.get(pk=other.pk).status == "pending"  # opening the form decided nothing
    form.get_by_label("Why reject it?").fill("not b.txt today")
    if SHOTS:
        save_shots(form, said)
    form.get_by_role("button", name="Reject").click()

    expect(form.get_by_role("heading", name="Rejected")).to_be_visible()
    rejected = Approval.objects.get(pk=other.pk)
    assert (rejected.status, rejected.rejection_reason, rejected.decided_via) == ("rejected", "not b.txt today", "push")
    page.goto("/profile/")

    section.get_by_role("button", name=re.compile("^Remove Chrome")).click()

    expect(section.get_by_text("No device gets notifications yet.")).to_be_visible()
    assert not PushSubscription.objects.filter(user=alice).exists()


def save_shots(form, said: list[dict]) -> None:
    """What the notifications said, as text and drawn as a page, and the reject form at two widths."""
    where = Path(SHOTS)
    where.mkdir(parents=True, exist_ok=True)
    text = "\n\n".join(f"{n['title']}\n{n['body']}\n[{' | '.join(n['actions'])}]" for n in said)
    (where / "push-notifications.txt").write_text(text + "\n")
    drawn = form.context.new_page()
    cards = "".join(
        "<div class=n><b></b><pre></pre><p></p></div>" for _ in said
    )
    drawn.set_content(f"<style>body{{font:14px system-ui;background:#eee;padding:16px}} .n{{background:#fff;border-radius:8px;"
                      f"padding:12px;margin:0 0 12px;max-width:420px;box-shadow:0 1px 4px #0003}} pre{{white-space:pre-wrap;font:inherit;"
                      f"margin:6px 0}} p{{color:#0b57d0;margin:0}}</style>{cards}")
    drawn.evaluate("said => document.querySelectorAll('.n').forEach((n, i) => { n.querySelector('b').textContent = said[i].title;"
                   " n.querySelector('pre').textContent = said[i].body; n.querySelector('p').textContent = said[i].actions.join('   '); })", said)
    drawn.screenshot(path=str(where / "push-notifications.png"), full_page=True)
    drawn.close()
    for width in (1280, 390):
        form.set_viewport_size({"width": width, "height": 800})
        form.screenshot(path=str(where / f"push-reject-form-{width}.png"), full_page=True)


def test_a_refused_permission_is_said_and_nothing_is_stored(page, e2e, alice):  # noqa: F811
    log_in(page, alice)
    page.goto("/profile/")
    page.evaluate("Notification.requestPermission = async () => 'denied'")

    page.get_by_role("button", name="Turn on notifications on this device").click()

    expect(page.locator("[data-push-status]")).to_contain_text("Notifications are blocked for this site")
    expect(page.get_by_role("button", name="Turn on notifications on this device")).to_be_enabled()
    assert not PushSubscription.objects.exists()
