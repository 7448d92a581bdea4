"""Step-up with passkeys: a call at or above its agent's step_up_from_risk is approved only on the
site, with a passkey assertion (user verified) whose challenge was issued for that approval at that
version, used once; every other surface may only reject it. Verified for real by py_webauthn against
a software authenticator (tests.standins.soft_passkey)."""
import json

import pytest
from django.test import Client

from approvals import audit
from approvals.models import Approval
from approvals.services import StepUp, StepUpRequired, decide, decide_many
from stepup.models import Challenge, Passkey
from tests.conftest import client_for, intact, pending_approvals, start_conversation as start
from tests.standins.soft_passkey import SoftPasskey

pytestmark = pytest.mark.django_db(transaction=True)

STEP_UP = "Approve on the site with your passkey"


def post_json(client: Client, url: str, body) -> "object":
    return client.post(url, json.dumps(body), content_type="application/json")


def register(client: Client, password: str, key: SoftPasskey, *, name: str = "laptop", user_verified: bool = True):
    options = post_json(client, "/stepup/passkeys/options/", {"password": password})
    assert options.status_code == 200, options.content
    return post_json(client, "/stepup/passkeys/", {"name": name, "credential": key.create(options.json(), user_verified=user_verified)})


@pytest.fixture
def strict(agent):
    """The demo agent, asking a passkey from critical up."""
    agent.step_up_from_risk = "critical"
    agent.save(update_fields=["step_up_from_risk"])
    return agent


@pytest.fixture
def critical(alice, strict):
    """alice's pending `delete all files` (critical, confirmation DELETE)."""
    [approval] = pending_approvals(start(alice, strict, "delete all files"))
    assert approval.risk == "critical"
    return approval


@pytest.fixture
def alice_key(alice):
    key = SoftPasskey()
    assert register(client_for(alice), "alice-password", key).status_code == 201
    return key


def options_for(client: Client, approval: Approval, **body):
    return post_json(client, f"/stepup/approvals/{approval.pk}/options/", {"shown_hash": approval.shown_hash, "confirmation": "DELETE", **body})


def approve_with(client: Client, approval: Approval, credential: dict, **body):
    return post_json(client, f"/stepup/approvals/{approval.pk}/approve/", {"credential": credential, "via": "chat", "confirmation": "DELETE", **body})


def ceremony(client: Client, approval: Approval, key: SoftPasskey, **get):
    options = options_for(client, approval)
    assert options.status_code == 200 and options.json()["step_up"] is True, options.content
    return approve_with(client, approval, key.get(options.json()["options"], **get))


def refreshed(approval: Approval) -> Approval:
    return Approval.objects.get(pk=approval.pk)


# --- Registering passkeys -------------------------------------------------------------------------


def test_a_passkey_is_registered_with_the_password_and_listed_on_the_profile(alice):
    key = SoftPasskey()
    client = client_for(alice)

    added = register(client, "alice-password", key, name="work laptop")

    assert added.status_code == 201
    [passkey] = Passkey.objects.filter(user=alice)
    assert (passkey.name, passkey.credential_id, passkey.sign_count) == ("work laptop", key.id, 0)
    page = client.get("/profile/").content.decode()
    assert 'id="passkeys"' in page and "work laptop" in page and "never used" in page


def test_without_the_password_no_challenge_is_issued_and_nothing_is_registered(alice):
    client = client_for(alice)
    for body in ({"password": "wrong"}, {}, {"password": ["alice-password"]}):
        refused = post_json(client, "/stepup/passkeys/options/", body)
        assert refused.status_code == 403 and "password" in refused.json()["detail"]
    assert not Challenge.objects.exists() and not Passkey.objects.exists()


def test_a_passkey_without_user_verification_is_not_registered(alice):
    refused = register(client_for(alice), "alice-password", SoftPasskey(), user_verified=False)
    assert refused.status_code == 400 and "verif" in refused.json()["detail"].lower()
    assert not Passkey.objects.exists()


def test_a_registration_answer_is_used_once_and_only_by_whom_it_was_issued_to(alice, mallory):
    key = SoftPasskey()
    options = post_json(client_for(alice), "/stepup/passkeys/options/", {"password": "alice-password"}).json()
    answer = key.create(options)

    stolen = post_json(client_for(mallory), "/stepup/passkeys/", {"name": "mine", "credential": answer})
    first = post_json(client_for(alice), "/stepup/passkeys/", {"name": "laptop", "credential": answer})
    again = post_json(client_for(alice), "/stepup/passkeys/", {"name": "again", "credential": answer})

    assert stolen.status_code == 400 and first.status_code == 201 and again.status_code == 400
    assert list(Passkey.objects.values_list("user__username", "name")) == [("alice", "laptop")]


def test_a_passkey_is_removed_by_its_owner_only(alice, mallory, alice_key):
    passkey = Passkey.objects.get()
    assert client_for(mallory).post(f"/stepup/passkeys/{passkey.pk}/remove/").status_code == 404
    assert Passkey.objects.exists()
    assert client_for(alice).post(f"/stepup/passkeys/{passkey.pk}/remove/").status_code == 302
    assert not Passkey.objects.exists()


def test_garbage_registrations_are_refused_clearly(alice):
    client = client_for(alice)
    post_json(client, "/stepup/passkeys/options/", {"password": "alice-password"})
    for credential in (None, "not json", {"id": "x"}, {"id": "x", "rawId": "x", "response": {"clientDataJSON": "!!"}}, [1, 2], 7):
        refused = post_json(client, "/stepup/passkeys/", {"name": "k", "credential": credential})
        assert refused.status_code == 400 and refused.json()["detail"]
    assert client.post("/stepup/passkeys/", b"\xff\xfe", content_type="application/json").status_code == 400
    assert not Passkey.objects.exists()


# --- Approving with a passkey ---------------------------------------------------------------------


def test_a_critical_call_is_approved_with_the_passkey_and_its_confirmation_and_the_chain_keeps_the_assertion(alice, critical, alice_key):
    client = client_for(alice)

    approved = ceremony(client, critical, alice_key)

    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    approval = refreshed(critical)
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "chat")
    assert approval.step_up_assertion == alice_key.id
    assert audit.content(approval)["step_up_assertion"] == alice_key.id
    assert intact().startswith("audit chain intact")
    assert Passkey.objects.get().sign_count == 1 and Passkey.objects.get().last_used_at is not None


@pytest.mark.parametrize(("route", "recorded"), [("approvals", "chat"), ("dashboard/approvals", "dashboard")])
def test_the_surface_recorded_is_the_routes_never_the_one_the_client_names(alice, critical, alice_key, route, recorded):
    client = client_for(alice)
    options = options_for(client, critical)
    credential = alice_key.get(options.json()["options"])
    body = {"credential": credential, "via": "telegram", "confirmation": "DELETE"}

    approved = post_json(client, f"/stepup/{route}/{critical.pk}/approve/", body)

    assert approved.status_code == 200 and refreshed(critical).decided_via == recorded


def test_a_decision_without_step_up_hashes_as_links_did_before(alice, agent):
    [approval] = pending_approvals(start(alice, agent, "delete all files"))
    decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash, confirmation="DELETE")
    assert "step_up_assertion" not in audit.content(refreshed(approval))
    assert intact().startswith("audit chain intact")


def test_the_card_shows_the_passkey_step_only_for_calls_that_need_it(alice, critical, agent):
    page = client_for(alice).get(f"/conversations/{critical.conversation_id}/").content.decode()
    assert f'data-step-up-options="/stepup/approvals/{critical.pk}/options/"' in page and "with your passkey" in page

    agent.step_up_from_risk = ""
    agent.save(update_fields=["step_up_from_risk"])
    page = client_for(alice).get(f"/conversations/{critical.conversation_id}/").content.decode()
    assert "data-step-up-options" not in page


def test_an_assertion_without_user_verification_is_refused(alice, critical, alice_key):
    refused = ceremony(client_for(alice), critical, alice_key, user_verified=False)
    assert refused.status_code == 400 and "verif" in refused.json()["detail"].lower()
    assert refreshed(critical).status == "pending"


def test_without_a_passkey_the_options_say_to_add_one(alice, critical):
    refused = options_for(client_for(alice), critical)
    assert refused.status_code == 400 and "profile" in refused.json()["detail"]
    assert not Challenge.objects.exists()


def test_a_wrong_confirmation_is_refused_before_the_passkey_is_asked(alice, critical, alice_key):
    refused = options_for(client_for(alice), critical, confirmation="delete")
    assert refused.status_code == 400 and "DELETE" in refused.json()["detail"]
    assert not Challenge.objects.filter(purpose="approve").exists()


def test_the_passkey_alone_does_not_approve_a_critical_call_without_its_confirmation(alice, critical, alice_key):
    client = client_for(alice)
    options = options_for(client, critical).json()["options"]
    refused = approve_with(client, critical, alice_key.get(options), confirmation="nope")
    assert refused.status_code == 409 and "DELETE" in refused.json()["detail"]
    assert refreshed(critical).status == "pending"


def test_a_replayed_assertion_is_refused(alice, critical, alice_key, strict):
    client = client_for(alice)
    options = options_for(client, critical).json()["options"]
    answer = alice_key.get(options, counter=5)
    bad_confirmation = approve_with(client, critical, answer, confirmation="nope")  # used up, though it decided nothing

    replayed = approve_with(client, critical, answer)

    assert bad_confirmation.status_code == 409
    assert replayed.status_code == 400 and "used already" in replayed.json()["detail"]
    assert refreshed(critical).status == "pending"


def test_a_challenge_for_one_approval_does_not_approve_another(alice, strict, alice_key):
    first = pending_approvals(start(alice, strict, "delete all files"))[0]
    second = pending_approvals(start(alice, strict, "delete all files"))[0]
    client = client_for(alice)
    answer = alice_key.get(options_for(client, first).json()["options"])

    refused = approve_with(client, second, answer)

    assert refused.status_code == 400 and "not for this request" in refused.json()["detail"]
    assert refreshed(first).status == refreshed(second).status == "pending"


def test_a_challenge_for_an_older_version_does_not_approve_the_edited_call(alice, critical, alice_key):
    client = client_for(alice)
    answer = alice_key.get(options_for(client, critical).json()["options"])
    Approval.objects.filter(pk=critical.pk).update(edited_arguments={}, edited_arguments_hash="f" * 64)  # edited meanwhile

    refused = approve_with(client, critical, answer)

    assert refused.status_code == 409 and "changed" in refused.json()["detail"]
    assert refreshed(critical).status == "pending"


def test_another_users_passkey_or_challenge_proves_nothing(alice, bob, mallory, critical, alice_key):
    mallory_key = SoftPasskey()
    assert register(client_for(mallory), "mallory-password", mallory_key).status_code == 201
    alice_options = options_for(client_for(alice), critical).json()["options"]

    # mallory's key answering alice's challenge, on alice's session: not one of alice's passkeys.
    foreign = approve_with(client_for(alice), critical, mallory_key.get(alice_options))
    # mallory posting alice's challenge (and key) from her own session: not issued to her.
    alice_options = options_for(client_for(alice), critical).json()["options"]
    stolen = approve_with(client_for(mallory), critical, alice_key.get(alice_options))
    # mallory asking for a challenge on alice's call: she may not see it.
    hidden = options_for(client_for(mallory), critical)

    assert foreign.status_code == 400 and "not one of yours" in foreign.json()["detail"]
    assert stolen.status_code in (400, 404) and hidden.status_code == 404
    assert refreshed(critical).status == "pending"


def test_a_counter_that_goes_back_is_refused_as_a_cloned_key(alice, strict, alice_key):
    first = pending_approvals(start(alice, strict, "delete all files"))[0]
    assert ceremony(client_for(alice), first, alice_key, counter=10).status_code == 200
    second = pending_approvals(start(alice, strict, "delete all files"))[0]

    cloned = ceremony(client_for(alice), second, alice_key, counter=3)

    assert cloned.status_code == 400 and refreshed(second).status == "pending"


def test_an_expired_challenge_is_refused(alice, critical, alice_key):
    client = client_for(alice)
    answer = alice_key.get(options_for(client, critical).json()["options"])
    Challenge.objects.update(expires_at=Challenge.objects.get(purpose="approve").created_at)

    refused = approve_with(client, critical, answer)

    assert refused.status_code == 400 and "too late" in refused.json()["detail"]


def test_the_step_up_posts_need_a_session_and_a_csrf_token(alice, critical, alice_key):
    anonymous = Client().post(f"/stepup/approvals/{critical.pk}/options/", "{}", content_type="application/json")
    forged = client_for(alice, csrf=True).post(f"/stepup/approvals/{critical.pk}/options/", "{}", content_type="application/json")
    assert anonymous.status_code == 302 and forged.status_code == 403
    assert not Challenge.objects.filter(purpose="approve").exists()


def test_garbage_assertions_are_refused_clearly_and_decide_nothing(alice, critical, alice_key):
    client = client_for(alice)
    options_for(client, critical)
    for credential in (None, "{", {"id": alice_key.id}, {"id": 1, "rawId": 2, "response": 3}, ["x"]):
        refused = approve_with(client, critical, credential)
        assert refused.status_code == 400 and refused.json()["detail"]
    assert post_json(client, f"/stepup/approvals/{critical.pk}/options/", {"shown_hash": 5}).status_code == 400
    assert refreshed(critical).status == "pending"


def test_a_call_below_the_threshold_is_approved_as_ever(alice, agent, alice_key):
    agent.step_up_from_risk = "critical"
    agent.save(update_fields=["step_up_from_risk"])
    [email] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))  # high
    assert options_for(client_for(alice), email).json() == {"step_up": False}
    decide(email.pk, user=alice, approve=True, via="chat", shown_hash=email.shown_hash)
    assert refreshed(email).status == "approved" and refreshed(email).step_up_assertion == ""


def test_from_high_a_high_call_needs_the_passkey_too(alice, agent, alice_key):
    agent.step_up_from_risk = "high"
    agent.save(update_fields=["step_up_from_risk"])
    [email] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))

    with pytest.raises(StepUpRequired):
        decide(email.pk, user=alice, approve=True, via="chat", shown_hash=email.shown_hash)
    options = options_for(client_for(alice), email, confirmation="")
    approved = approve_with(client_for(alice), email, alice_key.get(options.json()["options"]), confirmation="")

    assert approved.status_code == 200 and refreshed(email).step_up_assertion == alice_key.id


# --- The decision service: one place, every surface -----------------------------------------------


def test_without_a_proof_approving_raises_step_up_required_and_rejecting_needs_none(alice, critical):
    seen = {"user": alice, "via": "chat", "shown_hash": critical.shown_hash}
    with pytest.raises(StepUpRequired, match=STEP_UP):
        decide(critical.pk, approve=True, confirmation="DELETE", **seen)
    assert refreshed(critical).status == "pending"

    decide(critical.pk, approve=False, reason="not today", **seen)
    assert refreshed(critical).status == "rejected" and intact().startswith("audit chain intact")


def test_a_proof_is_for_one_approval_one_version_and_one_user(alice, bob, strict):
    approval = pending_approvals(start(alice, strict, "delete all files"))[0]
    seen = {"user": alice, "approve": True, "via": "chat", "shown_hash": approval.shown_hash, "confirmation": "DELETE"}
    for proof in (
        StepUp(approval_id=approval.pk + 1, shown_hash=approval.shown_hash, user_id=alice.pk, credential_id="k"),
        StepUp(approval_id=approval.pk, shown_hash="0" * 64, user_id=alice.pk, credential_id="k"),
        StepUp(approval_id=approval.pk, shown_hash=approval.shown_hash, user_id=bob.pk, credential_id="k"),
    ):
        with pytest.raises(StepUpRequired):
            decide(approval.pk, step_up=proof, **seen)
    assert refreshed(approval).status == "pending"


def test_bulk_and_approve_all_leave_step_up_calls_out(alice, critical, agent, api_as):
    # Even a call that needs no typed confirmation: a high one, from high up.
    agent.step_up_from_risk = "high"
    agent.save(update_fields=["step_up_from_risk"])
    [email] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))

    bulk = api_as(alice).post("approvals/decisions", {"ids": [email.pk, critical.pk], "decision": "approve"})
    every = decide_many({email.pk: ""}, user=alice, approve=True, via="dashboard")

    assert bulk.status_code == 200 and sorted(bulk.json()["needs_confirmation"]) == sorted([email.pk, critical.pk])
    assert every.needs_confirmation == [email.pk] and not every.decided
    assert refreshed(email).status == refreshed(critical).status == "pending"
    rejected = decide_many({email.pk: "", critical.pk: ""}, user=alice, approve=False, via="dashboard")
    assert len(rejected.decided) == 2


def test_the_api_refuses_to_approve_with_403_and_the_reason_but_rejects(alice, critical, api_as):
    refused = api_as(alice).post(f"approvals/{critical.pk}/decision", {"decision": "approve", "confirmation": "DELETE"})
    assert refused.status_code == 403 and STEP_UP in refused.json()["detail"]
    assert refreshed(critical).status == "pending"

    rejected = api_as(alice).post(f"approvals/{critical.pk}/decision", {"decision": "reject", "reason": "no"})
    assert rejected.status_code == 200 and refreshed(critical).status == "rejected"


def test_the_cards_plain_approve_post_refuses_without_the_passkey(alice, critical):
    refused = client_for(alice).post(
        f"/approvals/{critical.pk}/decide/", {"decision": "approve", "confirmation": "DELETE", "shown_hash": critical.shown_hash},
    )
    assert STEP_UP in refused.content.decode()
    assert refreshed(critical).status == "pending"


# --- Every other surface may only reject ----------------------------------------------------------


@pytest.fixture
def high(alice, agent):
    """alice's pending send_email (high: no typed confirmation), the agent asking a passkey from high up."""
    agent.step_up_from_risk = "high"
    agent.save(update_fields=["step_up_from_risk"])
    [approval] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))
    assert approval.risk == "high"
    return approval


@pytest.fixture
def telegram(settings):
    from tests.telegramlink.phone import RefusingTelegram

    with RefusingTelegram() as fake:
        settings.TELEGRAM_BOT_TOKEN, settings.TELEGRAM_API_BASE_URL = fake.token, fake.url
        yield fake


@pytest.fixture
def slack(settings):
    from tests.standins.fake_slack import FakeSlack, django_poster

    with FakeSlack(poster=django_poster(Client())) as fake:
        settings.SLACK_BOT_TOKEN, settings.SLACK_SIGNING_SECRET, settings.SLACK_API_BASE_URL = fake.token, fake.signing_secret, fake.url
        yield fake


def test_telegram_refuses_to_approve_with_the_sentence_and_rejects(telegram, alice, agent):
    from tests.telegramlink.phone import ALICE_TG, link, press, request_to

    link(alice, ALICE_TG)
    agent.step_up_from_risk = "high"
    agent.save(update_fields=["step_up_from_risk"])
    email = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))[0]
    wipe = pending_approvals(start(alice, agent, "delete all files"))[0]  # critical: refused before the confirmation is asked
    tokens_ = {}
    for approval in (email, wipe):
        buttons = request_to(telegram, ALICE_TG, approval)["reply_markup"]["inline_keyboard"]
        tokens_[approval.pk] = next(b["callback_data"] for row in buttons for b in row if b["callback_data"].startswith("a:"))[2:]

    for number, approval in enumerate((email, wipe)):
        assert STEP_UP in press(telegram, ALICE_TG, f"a:{tokens_[approval.pk]}", query_id=f"q{number}")
        assert refreshed(approval).status == "pending"
    assert press(telegram, ALICE_TG, f"r:{tokens_[email.pk]}", query_id="q9") == "Rejected."
    assert refreshed(email).status == "rejected"


def test_slack_refuses_to_approve_with_the_sentence_and_rejects(slack, alice, agent):
    from tests.slacklink.workspace import ALICE, link, request_to

    link(slack, alice, ALICE)
    agent.step_up_from_risk = "high"
    agent.save(update_fields=["step_up_from_risk"])
    [approval] = pending_approvals(start(alice, agent, "email bob@example.com about lunch"))

    assert slack.press(ALICE, request_to(slack, ALICE, approval), "Approve")[0] == 200
    assert STEP_UP in slack.ephemerals(ALICE)[-1] and refreshed(approval).status == "pending"
    assert slack.press(ALICE, request_to(slack, ALICE, approval), "Reject")[0] == 200
    assert slack.submit(ALICE, slack.views()[-1], {"reason": "no"})[0] == 200  # Reject asks why in a modal
    assert refreshed(approval).status == "rejected"


def test_an_email_link_refuses_to_approve_with_the_sentence_and_still_rejects(alice, high):
    from approvals import tokens

    token = tokens.issue(high, alice, channel="email")
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = "k" * 32
    form = {"csrfmiddlewaretoken": "k" * 32}

    refused = browser.post(f"/approve/{token}/", {"decision": "approve", **form})
    rejected = browser.post(f"/approve/{token}/", {"decision": "reject", "reason": "no", **form})

    assert refused.status_code == 409 and STEP_UP in refused.content.decode()
    assert rejected.status_code == 200 and refreshed(high).status == "rejected"


def test_a_push_action_refuses_to_approve_with_the_sentence_and_still_rejects(alice, high):
    from approvals import tokens

    def act(token: str, decision: str):
        return Client().post("/push/decide", json.dumps({"token": token, "decision": decision}), content_type="application/json")

    token = tokens.issue(high, alice, channel="push")
    refused = act(token, "approve")
    rejected = act(token, "reject")

    assert refused.status_code == 409 and refused.json()["message"].startswith(STEP_UP)
    assert rejected.status_code == 200 and refreshed(high).status == "rejected"


def test_a2a_refuses_to_approve_with_the_sentence_and_denies(alice, strict):
    from tests.agentlink.a2a_client import a2a_task, refused, send

    task = a2a_task(alice, strict, "delete all files")
    [approval] = pending_approvals(task.conversation)

    refusal = refused(task, alice, {"decisions": [{"id": approval.pk, "decision_type": "approve", "confirmation": "DELETE"}]})
    assert STEP_UP in refusal.message and refreshed(approval).status == "pending"

    assert send(task, alice, {"decisions": [{"id": approval.pk, "decision_type": "deny"}]}) == 1
    assert refreshed(approval).status == "rejected"


def test_a_text_reply_does_not_approve_and_says_where_to(alice, high):
    from chat import services as chat_services
    from chat.models import Conversation

    conversation = Conversation.objects.get(pk=high.conversation_id)
    chat_services.post_message(conversation=conversation, user=alice, content="yes")

    assert refreshed(high).status == "pending"
    assert "passkey" in conversation.messages.order_by("position").last().content
    chat_services.post_message(conversation=conversation, user=alice, content="no")
    assert refreshed(high).status == "rejected"


def test_an_edit_that_approves_needs_the_proof_and_keeps_it(alice, high):
    from approvals.services import approve_edited

    arguments = high.tool_call.arguments | {"body": "Lunch at one?"}
    seen = {"user": alice, "via": "chat", "shown_hash": high.shown_hash}
    with pytest.raises(StepUpRequired):
        approve_edited(high.pk, arguments=arguments, **seen)
    assert refreshed(high).status == "pending" and not refreshed(high).is_edited

    proof = StepUp(approval_id=high.pk, shown_hash=high.shown_hash, user_id=alice.pk, credential_id="credential-1")
    approved = approve_edited(high.pk, arguments=arguments, step_up=proof, **seen)

    assert (approved.status, approved.is_edited, approved.step_up_assertion) == ("approved", True, "credential-1")
    assert intact().startswith("audit chain intact")


def test_always_on_the_card_saves_no_rule_without_the_passkey(alice, high):
    from approvals.models import Rule

    response = client_for(alice).post(f"/approvals/{high.pk}/decide/", {
        "decision": "approve", "shown_hash": high.shown_hash, "remember_scope": "conversation",
    })

    assert STEP_UP in response.content.decode()
    assert refreshed(high).status == "pending" and not Rule.objects.exists()
