"""Web Push subscriptions (pushlink): the service worker at the root, a browser's subscription stored
as the user's device (behind a login and a CSRF token, within the device limit, refusing what is
none), removed by its owner only, the profile page's button, and the VAPID keys."""
import json

import pytest
from django.test import Client

from pushlink import keys
from pushlink.models import PushSubscription
from tests.conftest import client_for
from tests.pushlink.devices import subscribe

pytestmark = pytest.mark.django_db


def test_the_service_worker_is_served_at_the_root_as_javascript_for_the_whole_site(client):
    response = client.get("/sw.js")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert response["Service-Worker-Allowed"] == "/"
    body = response.content.decode()
    assert 'addEventListener("push"' in body and "/push/decide" in body and "notificationclick" in body
    assert '"/push/reject/#" + encodeURIComponent(tokens.reject)' in body and "/push/extend" in body  # Reject opens the form
    assert client.post("/sw.js").status_code == 405


def test_a_subscription_is_stored_as_the_users_device(fake, alice):
    subscription = subscribe(fake, alice)

    stored = PushSubscription.objects.get()
    assert (stored.user, stored.endpoint, stored.auth) == (alice, subscription["endpoint"], subscription["keys"]["auth"])
    assert stored.device == "Chrome (127.0.0.1)"


def test_storing_a_subscription_needs_a_login_and_a_csrf_token(fake, alice):
    body = json.dumps(fake.subscribe())

    assert Client().post("/push/subscriptions", body, content_type="application/json").status_code == 403
    assert client_for(alice, csrf=True).post("/push/subscriptions", body, content_type="application/json").status_code == 403
    assert not PushSubscription.objects.exists()


def test_removing_a_subscription_needs_a_login_and_a_csrf_token(fake, alice):
    subscription = subscribe(fake, alice)
    body = json.dumps({"endpoint": subscription["endpoint"]})

    assert Client().delete("/push/subscriptions", body, content_type="application/json").status_code == 403
    assert client_for(alice, csrf=True).delete("/push/subscriptions", body, content_type="application/json").status_code == 403
    assert client_for(alice).get("/push/subscriptions").status_code == 405
    assert client_for(alice).post("/push/subscriptions", "x" * 20_000, content_type="application/json").status_code == 400
    assert PushSubscription.objects.count() == 1


def test_a_bad_vapid_key_setting_leaves_the_profile_page_working_without_the_button(alice, settings):
    settings.HITL_VAPID_PRIVATE_KEY = "not a key"

    page = client_for(alice).get("/profile/")

    assert page.status_code == 200 and "Turn on notifications" not in page.content.decode()


def _good(fake) -> dict:
    return fake.subscribe()


GARBAGE = {
    "not json": lambda good: "{not json",
    "a list": lambda good: [good],
    "no keys": lambda good: {"endpoint": good["endpoint"]},
    "keys not strings": lambda good: {**good, "keys": {"p256dh": 1, "auth": 2}},
    "p256dh not a point": lambda good: {**good, "keys": {**good["keys"], "p256dh": "BA" + "A" * 85}},
    "p256dh not base64": lambda good: {**good, "keys": {**good["keys"], "p256dh": "!!!"}},
    "auth too short": lambda good: {**good, "keys": {**good["keys"], "auth": "AAAA"}},
    "plain http elsewhere": lambda good: {**good, "endpoint": "http://push.example.com/x"},
    "not a push service": lambda good: {**good, "endpoint": "https://attacker.example/collect"},
    "an internal address": lambda good: {**good, "endpoint": "https://10.0.0.5/admin"},
    "a file url": lambda good: {**good, "endpoint": "file:///etc/passwd"},
    "credentials in the url": lambda good: {**good, "endpoint": "https://user:pw@fcm.googleapis.com/fcm/send/x"},
    "a look-alike host": lambda good: {**good, "endpoint": "https://fcm.googleapis.com.evil.example/x"},
    "another port": lambda good: {**good, "endpoint": "https://fcm.googleapis.com:6379/x"},
    "a bad port": lambda good: {**good, "endpoint": "https://fcm.googleapis.com:99999/x"},
    "too long": lambda good: {**good, "endpoint": "https://fcm.googleapis.com/" + "x" * 1000},
}


@pytest.mark.parametrize("case", GARBAGE)
def test_what_is_no_subscription_is_refused_with_400_and_nothing_stored(fake, alice, case):
    body = GARBAGE[case](_good(fake))
    data = body if isinstance(body, str) else json.dumps(body)

    response = client_for(alice).post("/push/subscriptions", data, content_type="application/json")

    assert response.status_code == 400 and response.json()["detail"]
    assert not PushSubscription.objects.exists()


def test_a_real_push_services_https_endpoint_is_taken(alice, fake):
    good = _good(fake)
    good["endpoint"] = "https://fcm.googleapis.com/fcm/send/abc:def"

    assert client_for(alice).post("/push/subscriptions", good, content_type="application/json").status_code == 201


def test_plain_http_to_this_machine_is_taken_only_in_development(settings, alice, fake):
    settings.HITL_PUSH_ALLOW_LOOPBACK = False

    assert client_for(alice).post("/push/subscriptions", _good(fake), content_type="application/json").status_code == 400


def test_the_same_browser_subscribing_again_keeps_one_device_owned_by_the_last_to_turn_it_on(fake, alice, bob):
    subscription = subscribe(fake, alice)
    client_for(alice).post("/push/subscriptions", subscription, content_type="application/json")
    assert PushSubscription.objects.get().user == alice

    client_for(bob).post("/push/subscriptions", subscription, content_type="application/json")

    assert PushSubscription.objects.get().user == bob


def test_a_person_may_not_register_past_the_device_limit(fake, alice, settings):
    settings.HITL_PUSH_MAX_DEVICES = 2
    subscribe(fake, alice)
    subscribe(fake, alice)

    response = client_for(alice).post("/push/subscriptions", fake.subscribe(), content_type="application/json")

    assert response.status_code == 400 and PushSubscription.objects.count() == 2


def test_delete_removes_ones_own_subscription_only(fake, alice, bob):
    mine, bobs = subscribe(fake, alice), subscribe(fake, bob)

    refused = client_for(alice).delete("/push/subscriptions", {"endpoint": bobs["endpoint"]}, content_type="application/json")
    removed = client_for(alice).delete("/push/subscriptions", {"endpoint": mine["endpoint"]}, content_type="application/json")

    assert (refused.status_code, removed.status_code) == (404, 200)
    assert list(PushSubscription.objects.values_list("user__username", flat=True)) == ["bob"]


def test_the_profile_page_offers_the_button_and_lists_and_removes_ones_devices(fake, alice, bob):
    subscribe(fake, alice, user_agent="Mozilla/5.0 Firefox/140.0")
    bobs = subscribe(fake, bob)
    page = client_for(alice).get("/profile/").content.decode()
    assert "Turn on notifications on this device" in page and f'data-vapid-key="{keys.public_key()}"' in page
    assert "Firefox (127.0.0.1)" in page and "pushlink/push.js" in page

    bob_device = PushSubscription.objects.get(endpoint=bobs["endpoint"])
    assert client_for(alice).post(f"/push/subscriptions/{bob_device.pk}/remove").status_code == 404
    mine = PushSubscription.objects.get(user=alice)
    assert client_for(alice, csrf=True).post(f"/push/subscriptions/{mine.pk}/remove").status_code == 403
    response = client_for(alice).post(f"/push/subscriptions/{mine.pk}/remove")

    assert response.status_code == 302 and response["Location"] == "/profile/#push"
    assert list(PushSubscription.objects.values_list("user__username", flat=True)) == ["bob"]


def test_the_vapid_key_is_generated_once_into_the_var_directory(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first = keys.public_key()

    assert (tmp_path / keys.KEY_FILE).exists() and keys.public_key() == first
    keys._vapid.cache_clear()
    assert keys.public_key() == first  # another process reads the same file


def test_vapid_keys_from_settings_are_used(settings, tmp_path):
    from py_vapid import Vapid

    settings.VAR_DIR = tmp_path
    made = Vapid()
    made.generate_keys()
    settings.HITL_VAPID_PRIVATE_KEY = made.private_pem().decode()

    assert keys.vapid().public_key.public_numbers() == made.public_key.public_numbers()
    assert not (tmp_path / keys.KEY_FILE).exists()
