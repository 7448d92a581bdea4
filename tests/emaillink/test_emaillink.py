"""One-click email as one more surface of the decision service (emaillink), in process: who is
mailed (deciders with an address who did not opt out; four eyes only the eligible), what a mail
says (tool, preview, arguments, escaped, invisible characters revealed; a text and an HTML part),
the link's page (a GET never decides; a POST decides once, only the version mailed, never with a
tampered token; a critical call asks for its confirmation; a vote below quorum is counted), the
profile's opt-out, and a mail server down then back. The mail server is tests/standins/smtp_sink.py (aiosmtpd),
reached through Django's SMTP backend; the scripted model runs inline (eager Celery)."""
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from approvals import services as approval_services
from approvals import tokens
from approvals.models import Approval, DecisionToken
from approvals.signals import approvals_expiring
from approvals.deciders.routemaking import create_route
from approvals.summary import summarize
from deliveries import outbox
from deliveries import tasks as delivery_tasks
from emaillink.channel import CHANNEL
from emaillink.models import EmailDelivery, EmailPreference
from tests.conftest import client_for, only_pending, start_conversation, warned_without_its_signal
from tests.standins.smtp_sink import SmtpSink, link, links, parts

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "https://hitl.example.org"


@pytest.fixture
def sink(settings):
    with SmtpSink() as smtp:
        settings.HITL_EMAIL_APPROVALS = True
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = smtp.host, smtp.port, False
        settings.EMAIL_TIMEOUT = 5
        settings.HITL_BASE_URL = BASE
        yield smtp


def with_address(user, address: str | None = None):
    user.email = address or f"{user.username}@example.org"
    user.save(update_fields=["email"])
    return user


def summary_of(approval: Approval):
    return summarize(Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=approval.pk))


def path_of(url: str) -> str:
    assert url.startswith(BASE + "/approve/")
    return url[len(BASE):]


def post(url: str, decision: str, **fields):
    """As the page's form does, from a browser holding the site's CSRF cookie (the page set it)."""
    browser = Client(enforce_csrf_checks=True)
    browser.cookies["csrftoken"] = CSRF
    return browser.post(path_of(url), {"decision": decision, "csrfmiddlewaretoken": CSRF, **fields})


CSRF = "k" * 32


def text_of(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


@pytest.fixture
def pending(sink, alice, agent):
    """alice's pending write_file approval, its mail in her inbox."""
    with_address(alice)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    (mail,) = sink.messages("alice@example.org")
    return approval, mail


# --- Who is mailed, and what a mail says ------------------------------------------------------------


def test_a_request_is_mailed_with_a_text_and_an_html_part_saying_what_approve_does_with_the_whole_details(pending, sink):
    approval, mail = pending

    # The contract: the subject names the target (for write_file, the path) and the requester.
    assert mail["To"] == "alice@example.org" and mail["Subject"].strip() == "Approve? Write a.txt (5 bytes) — asked by alice (Demo agent)"
    assert mail["X-Hitl-Approval"] == str(approval.pk)
    body = parts(mail)
    assert set(body) == {"text/plain", "text/html"}
    for part in body.values():
        assert "Approve? Write a.txt (5 bytes) — asked by alice (Demo agent)" in part  # the head says the same
        assert "Why: " in part or ">Why<" in part
        assert '"content": "hello"' in part.replace("&quot;", '"') and "New file a.txt, 5 bytes" in part and approval.risk in part
    why = re.search(r"^Why: (.*)$", body["text/plain"], re.M)[1]
    assert why.strip() and why.strip() not in ("write_file", "Demo agent needs approval for write_file.")
    urls = links(mail)
    assert urls["approve"].startswith(f"{BASE}/approve/") and urls["reject"].startswith(f"{BASE}/approve/")
    assert urls["approve"] != urls["reject"] and f'href="{urls["approve"]}"' in body["text/html"]
    assert f'href="{urls["reject"]}"' in body["text/html"]
    delivery = EmailDelivery.objects.get()
    assert (delivery.status, delivery.address, delivery.shown_hash) == ("sent", "alice@example.org", approval.shown_hash)
    # The Approve link's token may approve (its page shows the whole call); the Reject link's only rejects.
    assert sorted(DecisionToken.objects.values_list("channel", "complete")) == [("email", False), ("email", True)]


def test_arguments_are_escaped_in_html_and_invisible_characters_revealed(sink, alice, agent):
    with_address(alice)

    only_pending(start_conversation(alice, agent, "write <b>x</b> to a\u202eb.txt"))

    (mail,) = sink.messages()
    body = parts(mail)
    assert "\u202e" not in mail.as_string() and all("⟨U+202E⟩" in part for part in body.values())
    assert "<b>x</b>" not in body["text/html"] and "&lt;b&gt;x&lt;/b&gt;" in body["text/html"]


def test_a_four_eyes_call_is_mailed_only_to_eligible_approvers(sink, alice, bob, carol, mallory, ops_agent):
    for user in (alice, bob, carol, mallory):
        with_address(user)

    approval = only_pending(start_conversation(alice, ops_agent, "delete a.txt"))

    assert approval.approver_required
    assert sorted(m["To"] for m in sink.messages()) == ["bob@example.org", "carol@example.org"]
    status = post(link(sink.messages("bob@example.org")[0]), "approve").status_code
    approval.refresh_from_db()
    assert (status, approval.status, approval.decided_by, approval.decided_via) == (200, "approved", bob, "email")


def test_nobody_without_an_address_or_opted_out_is_mailed_and_nothing_when_email_is_off(sink, settings, alice, bob, agent):
    only_pending(start_conversation(alice, agent, "write hello to a.txt"))  # alice has no address
    with_address(alice)
    EmailPreference.objects.create(user=alice, opted_out=True)
    only_pending(start_conversation(alice, agent, "write hello to b.txt"))
    EmailPreference.objects.filter(user=alice).update(opted_out=False)
    settings.HITL_EMAIL_APPROVALS = False
    only_pending(start_conversation(alice, agent, "write hello to c.txt"))

    assert sink.messages() == [] and not EmailDelivery.objects.exists()


def test_the_profile_page_shows_the_address_and_opts_out_and_back_in(sink, alice, agent):
    with_address(alice)
    browser = client_for(alice, csrf=True)
    page = browser.get("/profile/").content.decode()
    assert "alice@example.org" in page and 'name="mail" value="on" checked' in page
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]

    assert browser.post("/email/preference/", {"csrfmiddlewaretoken": csrf}).status_code == 302  # unchecked: out
    only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    assert sink.messages() == [] and "You opted out" in browser.get("/profile/").content.decode()

    browser.post("/email/preference/", {"csrfmiddlewaretoken": csrf, "mail": "on"})
    only_pending(start_conversation(alice, agent, "write hello to b.txt"))
    assert len(sink.messages()) == 1 and EmailPreference.objects.get(user=alice).opted_out is False
    assert Client().post("/email/preference/", {"mail": "on"}).status_code in (302, 403)  # a login is needed


# --- The link's page ---------------------------------------------------------------------------------


def test_a_get_never_decides_and_shows_the_call_with_approve_and_reject(pending):
    approval, mail = pending

    for _ in range(2):
        response = Client().get(path_of(link(mail)))
        assert response.status_code == 200

    page = text_of(response)
    assert "write_file" in page and "a.txt" in page and 'value="approve"' in page and 'value="reject"' in page and 'name="reason"' in page
    assert response["Cache-Control"] == "no-store" and response["Referrer-Policy"] == "same-origin"
    assert Approval.objects.get(pk=approval.pk).status == "pending" and not DecisionToken.objects.filter(used_at__isnull=False).exists()


def test_the_reject_link_opens_the_reject_form_and_decides_nothing(pending):
    approval, mail = pending

    response = Client().get(path_of(links(mail)["reject"]))

    page = response.content.decode()
    assert response.status_code == 200 and 'data-state="reject"' in page
    assert 'name="reason"' in page and 'value="reject"' in page and 'value="approve"' not in page  # no green Approve on it
    assert "Reject? Write a.txt (5 bytes)" in text_of(response) and f"/conversations/{approval.conversation_id}/" in page
    assert Approval.objects.get(pk=approval.pk).status == "pending" and not DecisionToken.objects.filter(used_at__isnull=False).exists()


def test_the_approve_links_page_shows_the_whole_call_with_what_approve_does(pending):
    approval, mail = pending

    page = text_of(Client().get(path_of(link(mail))))

    assert "Approve? Write a.txt (5 bytes) — asked by alice (Demo agent)" in page
    assert "&quot;content&quot;: &quot;hello&quot;" in page and 'value="approve"' in page and 'value="reject"' in page


def test_reject_with_a_reason_from_the_reject_link(pending, alice):
    approval, mail = pending

    response = post(links(mail)["reject"], "reject", reason="wrong file")

    approval.refresh_from_db()
    assert response.status_code == 200 and "Rejected by alice via email" in text_of(response)
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "email", "wrong file")


def test_a_forged_approve_with_the_reject_links_token_approves_nothing_and_the_link_still_rejects(pending):
    approval, mail = pending
    reject_url = links(mail)["reject"]

    for url in (reject_url, reject_url.split("?")[0]):  # with or without its query: the token decides what it may do
        forged = post(url, "approve")
        assert forged.status_code == 409 and "can only reject" in text_of(forged) and 'value="approve"' not in forged.content.decode()
    assert Approval.objects.get(pk=approval.pk).status == "pending" and not DecisionToken.objects.filter(used_at__isnull=False).exists()

    assert post(reject_url, "reject", reason="no").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "rejected"


def test_details_too_long_for_a_mail_are_said_cut_and_the_approve_page_shows_them_whole(sink, settings, alice, agent):
    settings.HITL_MAX_MESSAGE_CHARS = 40_000
    with_address(alice)
    content = "".join(f"line {n:05d}\n" for n in range(2_000)).strip()  # ~22,000 characters

    approval = only_pending(start_conversation(alice, agent, f"write {content} to big.txt"))

    (mail,) = sink.messages()
    assert "big.txt" in mail["Subject"] and "alice" in mail["Subject"]
    for part in parts(mail).values():
        assert "too long for a mail" in part and "line 01999" not in part
    page = Client().get(path_of(link(mail))).content.decode()
    assert "line 00000" in page and "line 01999" in page and 'value="approve"' in page
    assert post(link(mail), "approve").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_a_question_is_mailed_as_its_sentence_with_a_link_to_the_conversation_and_no_decision_links(sink, alice, agent):
    with_address(alice)

    approval = only_pending(start_conversation(alice, agent, "ask me what to call the file"))

    assert approval.kind == "question"
    (mail,) = sink.messages()
    assert mail["Subject"].strip() == summary_of(approval).head and "what to call the file" in mail["Subject"] and "alice" in mail["Subject"]
    for part in parts(mail).values():
        assert "what to call the file" in part and "Open" in part and f"/conversations/{approval.conversation_id}/" in part
        assert "/approve/" not in part
    assert not DecisionToken.objects.exists() and EmailDelivery.objects.get().status == "sent"


def test_a_plan_is_mailed_with_its_steps_and_approved_from_its_page(sink, alice, agent):
    with_address(alice)

    approval = only_pending(start_conversation(alice, agent, "plan a tidy-up of the notes"))

    assert approval.kind == "plan"
    (mail,) = sink.messages()
    assert mail["Subject"].strip() == summary_of(approval).head and "tidy-up of the notes" in mail["Subject"]
    steps = [str(step["action"]) for step in approval.plan["steps"]]
    assert all(step in parts(mail)["text/plain"] for step in steps) and set(links(mail)) == {"approve", "reject"}
    assert post(link(mail), "approve").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_approve_decides_via_email_as_the_recipient_and_a_second_post_never_decides(pending, alice):
    approval, mail = pending

    response = post(link(mail), "approve")

    approval.refresh_from_db()
    assert response.status_code == 200 and "Approved by alice via email" in text_of(response)
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "email")
    assert "by alice via email" in text_of(client_for(alice).get(f"/conversations/{approval.conversation_id}/"))  # the card says so

    again = post(link(mail), "reject", reason="changed my mind")

    assert again.status_code == 409 and "Already decided" in text_of(again) and "Approved by alice via email" in text_of(again)
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_reject_with_a_reason(pending):
    approval, mail = pending

    response = post(link(mail), "reject", reason="not <that> file")

    approval.refresh_from_db()
    assert (approval.status, approval.decided_via, approval.rejection_reason) == ("rejected", "email", "not <that> file")
    assert "not &lt;that&gt; file" in text_of(response)


def test_a_link_after_another_surface_decided_says_by_whom_and_how(pending, bob):
    approval, mail = pending
    approval_services.decide(approval.pk, user=bob, approve=False, via="api", shown_hash=approval.shown_hash, reason="not now")

    shown, pressed = Client().get(path_of(link(mail))), post(link(mail), "approve")

    assert "Rejected by bob via api" in text_of(shown) and "not now" in text_of(shown)
    assert pressed.status_code == 409 and "Rejected by bob via api" in text_of(pressed)
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


TAMPERED = {
    "garbage": lambda value: "not-a-token",
    "one character changed": lambda value: value[:-1] + ("A" if value[-1] != "A" else "B"),
    "signature of another": lambda value: value.split(":")[0] + ":" + "x" * 27,
    "very long": lambda value: "A" * 5000,
}


@pytest.mark.parametrize("case", TAMPERED)
def test_a_tampered_token_gets_a_403_page_and_decides_nothing(pending, case):
    approval, mail = pending
    url = BASE + "/approve/" + TAMPERED[case](path_of(link(mail)).split("/")[2]) + "/"

    shown, pressed = Client().get(path_of(url)), Client().post(path_of(url), {"decision": "approve"})

    assert shown.status_code == 403 and "not valid" in text_of(shown)
    assert pressed.status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_push_token_opens_nothing_here(pending, alice):
    approval, _ = pending
    value = tokens.issue(approval, alice, channel="push")

    assert Client().get(f"/approve/{value}/").status_code == 403
    assert post(f"{BASE}/approve/{value}/", "approve").status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_post_without_the_pages_csrf_token_decides_nothing(pending):
    approval, mail = pending

    response = Client(enforce_csrf_checks=True).post(path_of(link(mail)), {"decision": "approve"})

    assert response.status_code == 403 and Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_bad_decision_is_a_400_and_decides_nothing(pending):
    approval, mail = pending

    assert post(link(mail), "maybe").status_code == 400
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_expired_link_gets_a_403_page(pending):
    approval, mail = pending
    DecisionToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    shown, pressed = Client().get(path_of(link(mail))), post(link(mail), "approve")

    assert shown.status_code == 403 and "expired" in text_of(shown)
    assert pressed.status_code == 403 and Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_edit_after_sending_voids_the_link_says_so_and_mails_the_new_version(pending, sink, alice):
    approval, mail = pending
    approval_services.approve_edited(approval.pk, user=alice, arguments={"path": "b\u200b.txt", "content": "hello"}, via="chat",
                                     shown_hash=approval.shown_hash)
    edited = Approval.objects.get(pk=approval.pk)
    assert edited.status == "pending"

    shown, pressed = Client().get(path_of(link(mail))), post(link(mail), "approve")

    assert "edited since this mail" in text_of(shown) and f"/conversations/{approval.conversation_id}/" in text_of(shown)
    assert pressed.status_code == 409 and "edited since this mail" in text_of(pressed)
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    first, second = sink.messages("alice@example.org")
    assert "⟨U+200B⟩" in parts(second)["text/plain"] and link(second) != link(first)
    assert post(link(second), "approve").status_code == 200
    edited.refresh_from_db()
    assert (edited.status, edited.approved_arguments["path"]) == ("approved", "b\u200b.txt")


def test_a_critical_call_asks_for_its_confirmation_on_the_page(sink, alice, agent):
    with_address(alice)
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    assert approval.confirmation_required
    (mail,) = sink.messages()
    assert approval.confirmation_hint in parts(mail)["text/plain"]
    assert 'name="confirmation"' in text_of(Client().get(path_of(link(mail))))

    refused = post(link(mail), "approve", confirmation="yes")

    assert refused.status_code == 400 and "Type the confirmation" in text_of(refused)
    assert Approval.objects.get(pk=approval.pk).status == "pending" and not DecisionToken.objects.filter(used_at__isnull=False).exists()
    assert post(link(mail), "approve", confirmation=approval.confirmation_hint).status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_a_vote_below_quorum_is_counted_and_the_page_says_so(sink, alice, agent):
    finance = Group.objects.create(name="finance")
    dana, erin = (with_address(User.objects.create_user(name)) for name in ("dana", "erin"))
    for user in (dana, erin):
        user.groups.add(finance)
    create_route(created_by=None, agent=agent.slug, approvers=["finance"], quorum=2)
    approval = only_pending(start_conversation(alice, agent, "delete a.txt"))
    assert approval.quorum == 2 and sorted(m["To"] for m in sink.messages()) == ["dana@example.org", "erin@example.org"]

    voted = post(link(sink.messages("dana@example.org")[0]), "approve")

    assert voted.status_code == 200 and "Your vote is counted" in text_of(voted) and "1 of 2 approvals: dana" in text_of(voted)
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    again = post(link(sink.messages("dana@example.org")[0]), "approve")
    assert again.status_code == 409 and "already used" in text_of(again)
    assert post(link(sink.messages("erin@example.org")[0]), "approve").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


# --- Deliveries ---------------------------------------------------------------------------------------


def test_a_mail_server_down_blocks_nothing_and_the_sweep_sends_each_mail_once_when_it_is_back(sink, settings, alice, agent):
    with_address(alice)
    sink.stop()

    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))

    delivery = EmailDelivery.objects.get()
    assert delivery.status == "queued" and delivery.attempts >= 1 and "Connection refused" in delivery.last_error
    sink.start()
    EmailDelivery.objects.update(updated_at=timezone.now() - timedelta(hours=1), attempts=0)
    delivery_tasks.sweep()
    delivery_tasks.sweep()  # nothing stale now: nothing sent twice

    assert len(sink.messages()) == 1 and EmailDelivery.objects.get().status == "sent"
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_a_decision_closes_a_mail_not_yet_sent(sink, settings, alice, bob, agent):
    with_address(alice)
    settings.HITL_EMAIL_APPROVALS = False
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    settings.HITL_EMAIL_APPROVALS = True
    (delivery_id,) = CHANNEL.queue(approval)

    approval_services.decide(approval.pk, user=bob, approve=True, via="api", shown_hash=approval.shown_hash)

    assert outbox.send(CHANNEL, EmailDelivery, delivery_id) == outbox.Sent.NOT_CLAIMED
    assert EmailDelivery.objects.get().status == "closed" and sink.messages() == []


def test_a_refused_address_fails_at_once_and_is_listed_for_operators(sink, alice, agent, admin_client):
    with_address(alice)
    sink.refused.add("alice@example.org")

    only_pending(start_conversation(alice, agent, "write hello to a.txt"))

    delivery = EmailDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("failed", 1) and "550" in delivery.last_error
    listing = admin_client.get("/admin/emaillink/emaildelivery/?status__exact=failed").content.decode()
    assert "550" in listing and "alice" in listing

    sink.refused.clear()  # the address fixed: the operator sends it again
    admin_client.post("/admin/emaillink/emaildelivery/", {"action": "send_again", "_selected_action": [delivery.pk]})

    assert EmailDelivery.objects.get().status == "sent" and len(sink.messages("alice@example.org")) == 1


def test_the_pages_own_form_decides_without_a_login(pending, alice):
    approval, mail = pending
    browser = Client(enforce_csrf_checks=True)
    page = browser.get(path_of(link(mail))).content.decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]

    response = browser.post(path_of(link(mail)), {"csrfmiddlewaretoken": csrf, "decision": "approve"})

    approval.refresh_from_db()
    assert response.status_code == 200 and (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "email")


def test_other_methods_and_a_deactivated_recipient_decide_nothing(pending, alice):
    approval, mail = pending
    url = path_of(link(mail))

    assert Client().put(url, "decision=approve").status_code == 405
    assert Client().delete(url).status_code == 405
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert Client().get(url).status_code == 403 and post(link(mail), "approve").status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == "pending"


def test_an_oversized_reason_is_cut_and_stored(pending):
    approval, mail = pending

    assert post(link(mail), "reject", reason="x" * 100_000).status_code == 200

    assert Approval.objects.get(pk=approval.pk).rejection_reason.startswith("x" * 100)


def test_a_due_reminder_mails_once_those_who_have_not_voted(sink, alice, agent):
    from approvals.deciders import escalation

    finance = Group.objects.create(name="finance")
    dana, erin = (with_address(User.objects.create_user(name)) for name in ("dana", "erin"))
    for user in (dana, erin):
        user.groups.add(finance)
    create_route(created_by=None, agent=agent.slug, approvers=["finance"], quorum=2, remind_after_seconds=60)
    approval = only_pending(start_conversation(alice, agent, "delete a.txt"))
    assert post(link(sink.messages("dana@example.org")[0]), "approve").status_code == 200  # dana voted
    later = timezone.now() + timedelta(seconds=61)

    assert escalation.send_due_reminders(now=later) == [approval.pk]
    escalation.send_due_reminders(now=later + timedelta(seconds=1))  # once

    reminders = [m for m in sink.messages() if m["Subject"].strip().startswith("Reminder: still waiting")]
    assert [m["To"] for m in reminders] == ["erin@example.org"] and "1 of 2 approvals: dana" in parts(reminders[0])["text/plain"]
    assert post(link(reminders[0]), "approve").status_code == 200
    assert Approval.objects.get(pk=approval.pk).status == "approved"


# --- Warnings before expiry ---------------------------------------------------------------------------


def expiring(approval: Approval, minutes: int = 5) -> Approval:
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=minutes))
    approval.refresh_from_db()
    return approval


def warnings_in(sink) -> list:
    return [m for m in sink.messages() if m["Subject"].strip().startswith("Expires at ")]


def test_a_warning_before_expiry_is_mailed_once_to_each_person_mailed_with_a_link_to_the_site(pending, sink):
    approval = expiring(pending[0])

    approvals_expiring.send(sender=Approval, approvals=[approval])
    approvals_expiring.send(sender=Approval, approvals=[approval])  # a second signal (a restart, two beats) sends nothing more

    (warning,) = warnings_in(sink)
    assert warning["To"] == "alice@example.org"
    assert warning["Subject"].strip() == f"Expires at {approval.expires_at:%H:%M} UTC: Write a.txt (5 bytes)"
    for part in parts(warning).values():
        assert "Extend" in part and f"/conversations/{approval.conversation_id}/" in part and "/approve/" not in part
    assert EmailDelivery.objects.get(kind="warning").status == "sent"


def test_no_warning_for_a_decided_call_nor_to_someone_never_mailed(pending, sink, bob):
    approval = expiring(pending[0])
    approval_services.decide(approval.pk, user=bob, approve=True, via="api", shown_hash=approval.shown_hash)

    approvals_expiring.send(sender=Approval, approvals=[approval])

    assert warnings_in(sink) == [] and not EmailDelivery.objects.filter(kind="warning").exists()


def test_a_warning_lost_while_the_mail_server_was_down_is_sent_once_by_the_sweep(pending, sink):
    approval = expiring(pending[0])
    sink.stop()
    approvals_expiring.send(sender=Approval, approvals=[approval])
    assert EmailDelivery.objects.get(kind="warning").status == "queued"

    sink.start()
    EmailDelivery.objects.filter(kind="warning").update(updated_at=timezone.now() - timedelta(hours=1), attempts=0)
    delivery_tasks.sweep()
    delivery_tasks.sweep()

    assert len(warnings_in(sink)) == 1 and EmailDelivery.objects.get(kind="warning").status == "sent"


def test_a_warning_whose_signal_was_lost_is_mailed_once_by_the_sweep(pending, sink, settings):
    approval = warned_without_its_signal(expiring(pending[0]))
    delivery_tasks.sweep()  # warned just now: the signal still has its chance
    assert not EmailDelivery.objects.filter(kind="warning").exists()

    settings.HITL_EMAIL_STALE_SECONDS = 0
    delivery_tasks.sweep()
    delivery_tasks.sweep()  # a restart, or the next beat: nothing more

    (warning,) = warnings_in(sink)
    assert warning["To"] == "alice@example.org" and f"/conversations/{approval.conversation_id}/" in parts(warning)["text/plain"]
    assert EmailDelivery.objects.get(kind="warning").status == "sent"
    approvals_expiring.send(sender=Approval, approvals=[approval])  # the signal after all: nothing more
    assert len(warnings_in(sink)) == 1


def test_the_sweep_mails_no_warning_for_a_decided_call_nor_an_expired_one(pending, sink, settings, bob):
    approval = warned_without_its_signal(expiring(pending[0]))
    settings.HITL_EMAIL_STALE_SECONDS = 0
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    delivery_tasks.sweep()  # past its deadline (the expiry sweep has not run yet): too late to warn

    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(minutes=5))
    approval_services.decide(approval.pk, user=bob, approve=True, via="api", shown_hash=approval.shown_hash)
    delivery_tasks.sweep()

    assert warnings_in(sink) == [] and not EmailDelivery.objects.filter(kind="warning").exists()


def test_a_request_mailed_after_its_approval_was_warned_is_followed_by_the_warning(sink, settings, alice, agent):
    with_address(alice)
    settings.HITL_EMAIL_APPROVALS = False  # the request's mail not sent before the warning: queued by hand below
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    settings.HITL_EMAIL_APPROVALS = True
    approval = warned_without_its_signal(expiring(approval))
    approvals_expiring.send(sender=Approval, approvals=[approval])  # nobody mailed yet: nobody to warn
    (delivery_id,) = CHANNEL.queue(approval)

    delivery_tasks.send.delay("email", "emaillink.EmailDelivery", delivery_id)

    assert [m["Subject"].strip().startswith("Expires at ") for m in sink.messages("alice@example.org")] == [False, True]
    assert set(EmailDelivery.objects.values_list("kind", "status")) == {("request", "sent"), ("warning", "sent")}
