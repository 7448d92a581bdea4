"""A mailed link's page: a GET never decides and shows the whole call with what Approve does, the
reject link opens the reject form, a forged approve with the reject link's token approves nothing, and
details too long for a mail are said cut and shown whole on the page."""
import pytest
from django.test import Client

from approvals.models import Approval, DecisionToken
from tests.conftest import only_pending, start_conversation
from tests.emaillink.recipient import path_of, post, text_of, with_address
from tests.standins.smtp_sink import link, links, parts

pytestmark = pytest.mark.django_db(transaction=True)


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
