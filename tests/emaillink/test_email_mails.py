"""Who is mailed and what a mail says (emaillink): deciders with an address who did not opt out, four
eyes only the eligible; a text and an HTML part with the tool, preview and whole details, escaped,
invisible characters revealed; a question as its sentence, a plan with its steps; the profile's opt-out."""
import re

import pytest
from django.test import Client

from approvals.models import Approval, DecisionToken
from approvals.summary import summarize
from emaillink.models import EmailDelivery, EmailPreference
from tests.conftest import client_for, only_pending, start_conversation
from tests.emaillink.recipient import BASE, post, with_address
from tests.standins.smtp_sink import link, links, parts

pytestmark = pytest.mark.django_db(transaction=True)


def summary_of(approval: Approval):
    return summarize(Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=approval.pk))


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
