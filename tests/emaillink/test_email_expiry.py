"""Warnings before expiry by email: mailed once to each person mailed, with a link to the site, never
for a decided call nor to someone never mailed, and a warning lost with the mail server or its signal
sent once by the sweep."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from approvals.signals import approvals_expiring
from deliveries import tasks as delivery_tasks
from emaillink.channel import CHANNEL
from emaillink.models import EmailDelivery
from tests.conftest import only_pending, start_conversation, warned_without_its_signal
from tests.emaillink.recipient import with_address
from tests.standins.smtp_sink import parts

pytestmark = pytest.mark.django_db(transaction=True)


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
