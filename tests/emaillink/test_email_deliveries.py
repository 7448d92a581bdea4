"""Email deliveries (the deliveries outbox): a mail server down blocks nothing and the sweep sends each
mail once it is back, a decision closes a mail not yet sent, a refused address fails at once and is
listed for operators, and a due reminder mails once those who have not voted."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from approvals.deciders.routemaking import create_route
from deliveries import outbox
from deliveries import tasks as delivery_tasks
from emaillink.channel import CHANNEL
from emaillink.models import EmailDelivery
from tests.conftest import only_pending, start_conversation
from tests.emaillink.recipient import post, with_address
from tests.standins.smtp_sink import link, parts

pytestmark = pytest.mark.django_db(transaction=True)


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
