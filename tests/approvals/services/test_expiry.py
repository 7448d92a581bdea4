"""Expiry that warns, extends and asks again (issue 35, item 7): the warning sweep sends each
warning once, an extend pushes the deadline back once (at most by the agent's timeout), an expired
approval is asked again for the same call and version without asking the model again, and a
decision after the expiry is refused and kept as late."""
import csv
import io
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from approvals import services
from approvals.models import Approval, LateDecision
from approvals.services import AlreadyDecided, NotExtendable, decide, decide_many, expire_overdue, extend, warn_expiring
from approvals.signals import approvals_expiring
from chat import fragments
from chat.history import REJECTION_NUDGE
from chat.models import Conversation, ToolCall
from chat.scripted import SCRIPTED_REQUESTS
from core.live import conversation_group
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HX-Request": "true"}


@pytest.fixture
def warned():
    """The approvals each approvals_expiring signal carried, one list per signal."""
    sent = []

    def receive(sender, approvals, **kwargs):
        sent.append([a.pk for a in approvals])

    approvals_expiring.connect(receive, dispatch_uid="tests.warned")
    yield sent
    approvals_expiring.disconnect(dispatch_uid="tests.warned")


def waiting(alice, agent, timeout: int = 600, text: str = "write hi to a.txt") -> Approval:
    agent.approval_timeout_seconds = timeout
    agent.save()
    [approval] = pending_approvals(start(alice, agent, text))
    return approval


def expired(alice, agent, **kwargs) -> Approval:
    approval = waiting(alice, agent, **kwargs)
    assert expire_overdue(now=approval.expires_at + timedelta(seconds=1)) == [approval.pk]
    approval.refresh_from_db()
    return approval


# --- The warning ------------------------------------------------------------------------------


def test_the_warning_is_due_at_80_percent_and_at_least_a_minute_before(alice, agent):
    approval = waiting(alice, agent, timeout=600)
    assert approval.warn_at == approval.requested_at + timedelta(seconds=480)

    short = waiting(alice, agent, timeout=200, text="write hi to b.txt")
    assert short.warn_at == short.requested_at + timedelta(seconds=140)  # a minute before, not at 160 s


def test_a_due_warning_is_sent_once(alice, agent, warned):
    approval = waiting(alice, agent)

    assert warn_expiring(now=approval.requested_at + timedelta(seconds=470)) == []
    assert warn_expiring(now=approval.requested_at + timedelta(seconds=481)) == [approval.pk]
    assert warn_expiring(now=approval.requested_at + timedelta(seconds=490)) == []

    assert warned == [[approval.pk]]
    approval.refresh_from_db()
    assert approval.warned_at is not None and approval.status == Approval.Status.PENDING


def test_a_warning_marked_before_a_restart_is_not_sent_again(alice, agent, warned):
    approval = waiting(alice, agent)
    # As a sweep that marked it and died before its signal went out: the mark is what counts.
    Approval.objects.filter(pk=approval.pk).update(warned_at=timezone.now())

    assert warn_expiring(now=approval.requested_at + timedelta(seconds=500)) == []
    assert warned == []


def test_decided_and_overdue_approvals_are_not_warned(alice, agent, warned):
    decided = waiting(alice, agent)
    decide(decided.pk, user=alice, approve=False, via="chat", shown_hash=decided.shown_hash)
    overdue = waiting(alice, agent, text="write hi to b.txt")

    assert warn_expiring(now=overdue.expires_at + timedelta(seconds=1)) == []
    assert warned == []


def test_an_extend_brings_a_new_warning_before_the_new_deadline(alice, agent, warned):
    approval = waiting(alice, agent)
    warn_expiring(now=approval.requested_at + timedelta(seconds=481))

    extended = extend(approval.pk, user=alice, via="api")

    assert extended.warned_at is None and extended.warn_at > approval.warn_at
    assert warn_expiring(now=extended.warn_at - timedelta(seconds=1)) == []
    assert warn_expiring(now=extended.warn_at) == [approval.pk]
    assert warned == [[approval.pk], [approval.pk]]


def test_the_warned_card_says_when_it_expires_and_offers_extend(alice, agent, client):
    approval = waiting(alice, agent)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(approval.conversation_id), channel)
    Approval.objects.filter(pk=approval.pk).update(warn_at=timezone.now() - timedelta(seconds=1))

    warn_expiring()

    pushed = async_to_sync(layer.receive)(channel)["html"]
    assert f'id="tool-call-{approval.tool_call_id}"' in pushed
    assert "Expires in 10 min (at " in pushed and " UTC)" in pushed
    assert f'form="extend-{approval.pk}"' in pushed and ">Extend</button>" in pushed


# --- Extend -----------------------------------------------------------------------------------


def test_extend_pushes_the_deadline_back_once_by_the_agents_timeout(alice, agent, api_as):
    approval = waiting(alice, agent)

    response = api_as(alice).post(f"approvals/{approval.pk}/extend")

    assert response.status_code == 200, response.content
    body = response.json()
    approval.refresh_from_db()
    assert approval.expires_at > approval.requested_at + timedelta(seconds=600)
    assert body["extended_by"] == "alice" and body["extended_at"] is not None
    assert approval.extended_by == alice
    assert api_as(alice).post(f"approvals/{approval.pk}/extend").status_code == 409


def test_extend_is_at_most_the_agents_timeout(alice, agent, api_as):
    approval = waiting(alice, agent, timeout=600)
    before = approval.expires_at

    response = api_as(alice).post(f"approvals/{approval.pk}/extend", {"seconds": 10**6})

    assert response.status_code == 200
    approval.refresh_from_db()
    assert approval.expires_at == before + timedelta(seconds=600)


def test_extend_by_some_seconds(alice, agent, api_as):
    approval = waiting(alice, agent)
    before = approval.expires_at

    assert api_as(alice).post(f"approvals/{approval.pk}/extend", {"seconds": 120}).status_code == 200
    approval.refresh_from_db()
    assert approval.expires_at == before + timedelta(seconds=120)


def test_an_approver_may_extend_and_someone_else_may_not_see_it(alice, bob, mallory, agent, api_as):
    approval = waiting(alice, agent)

    assert api_as(mallory).post(f"approvals/{approval.pk}/extend").status_code == 404
    assert api_as(bob).post(f"approvals/{approval.pk}/extend").status_code == 200
    assert Approval.objects.get(pk=approval.pk).extended_by == bob


def test_extend_refuses_no_deadline_and_decided_and_expired(alice, agent, api_as):
    agent.approval_timeout_seconds = None
    agent.save()
    [no_deadline] = pending_approvals(start(alice, agent, "write hi to a.txt"))
    decided = waiting(alice, agent, text="write hi to b.txt")
    decide(decided.pk, user=alice, approve=True, via="chat", shown_hash=decided.shown_hash)
    gone = expired(alice, agent, text="write hi to c.txt")

    for approval in (no_deadline, decided, gone):
        response = api_as(alice).post(f"approvals/{approval.pk}/extend")
        assert response.status_code == 409, (approval, response.content)
        assert Approval.objects.get(pk=approval.pk).extended_at is None
    assert "no deadline" in api_as(alice).post(f"approvals/{no_deadline.pk}/extend").json()["detail"]
    assert "expired" in api_as(alice).post(f"approvals/{gone.pk}/extend").json()["detail"]


def test_bad_extend_seconds_are_refused_and_change_nothing(alice, agent, api_as):
    approval = waiting(alice, agent)

    for body in ({"seconds": 0}, {"seconds": "soon"}, {"seconds": -5}):
        assert api_as(alice).post(f"approvals/{approval.pk}/extend", body).status_code in (400, 422)
    assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_the_cards_extend_button_extends_and_the_card_says_who(alice, agent):
    approval = waiting(alice, agent)
    Approval.objects.filter(pk=approval.pk).update(warned_at=timezone.now())

    response = client_for(alice, csrf=False).post(f"/approvals/{approval.pk}/extend/", headers=HX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "Extended once by alice" in html and ">Extend</button>" not in html
    approval.refresh_from_db()
    assert approval.extended_by == alice and approval.warned_at is None


def test_the_cards_extend_needs_a_csrf_token(alice, agent):
    approval = waiting(alice, agent)

    assert client_for(alice, csrf=True).post(f"/approvals/{approval.pk}/extend/").status_code == 403
    assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_extend_twice_at_once_extends_once(alice, bob, agent):
    approval = waiting(alice, agent)
    extend(approval.pk, user=alice, via="chat")

    with pytest.raises(NotExtendable):
        extend(approval.pk, user=bob, via="dashboard")
    assert Approval.objects.get(pk=approval.pk).extended_by == alice


# --- Ask again --------------------------------------------------------------------------------


def test_ask_again_makes_a_new_approval_for_the_same_version_without_the_model(alice, agent, api_as):
    old = expired(alice, agent)
    conversation = Conversation.objects.get(pk=old.conversation_id)
    assert conversation.status == Conversation.Status.IDLE
    SCRIPTED_REQUESTS.clear()  # a full deque (maxlen 100, after other tests) would count no new request
    model_calls = 0

    response = api_as(alice).post(f"approvals/{old.pk}/ask-again")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["shown_hash"], body["asked_again_from"]) == ("pending", old.shown_hash, old.pk)
    assert body["tool_call"]["name"] == "write_file" and body["tool_call"]["arguments"] == {"path": "a.txt", "content": "hi"}
    assert len(SCRIPTED_REQUESTS) == model_calls  # the model was not asked again
    new = Approval.objects.get(pk=body["id"])
    assert new.asked_again_from == old and new.tool_call_id != old.tool_call_id
    assert new.expires_at is not None and new.reason == old.reason and new.risk == old.risk
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert api_as(alice).get(f"approvals/{old.pk}").json()["asked_again"] == new.pk
    assert ToolCall.objects.get(pk=old.tool_call_id).status == ToolCall.Status.EXPIRED


def test_an_asked_again_call_runs_once_approved_and_the_conversation_ends_idle(alice, agent, api_as, settings):
    old = expired(alice, agent)
    new_id = api_as(alice).post(f"approvals/{old.pk}/ask-again").json()["id"]
    SCRIPTED_REQUESTS.clear()  # a full deque (maxlen 100, after other tests) would count no new request
    model_calls = 0

    response = api_as(alice).post(f"approvals/{new_id}/decision", {"decision": "approve", "shown_hash": old.shown_hash})

    assert response.status_code == 200
    new = Approval.objects.select_related("tool_call").get(pk=new_id)
    assert new.tool_call.status == ToolCall.Status.SUCCEEDED
    assert (settings.HITL_SANDBOX_ROOT / str(old.conversation_id) / "a.txt").read_text() == "hi"
    assert len(SCRIPTED_REQUESTS) == model_calls + 1  # told the result, once
    told = SCRIPTED_REQUESTS[-1]["messages"]
    assert [m["content"] for m in told if m["role"] == "tool"] == ["Not run: the approval timed out.", new.tool_call.result]
    conversation = Conversation.objects.get(pk=old.conversation_id)
    assert conversation.status == Conversation.Status.IDLE


def test_an_asked_again_call_rejected_is_reported_to_the_model(alice, agent, api_as):
    old = expired(alice, agent)
    new_id = api_as(alice).post(f"approvals/{old.pk}/ask-again").json()["id"]

    api_as(alice).post(f"approvals/{new_id}/decision", {"decision": "reject", "reason": "not today"})

    assert SCRIPTED_REQUESTS[-1]["messages"][-1]["content"] == "Rejected by alice: not today" + REJECTION_NUDGE
    assert Conversation.objects.get(pk=old.conversation_id).status == Conversation.Status.IDLE


def test_ask_again_refuses_what_is_not_expired(alice, agent, api_as):
    pending = waiting(alice, agent)
    rejected = waiting(alice, agent, text="write hi to b.txt")
    decide(rejected.pk, user=alice, approve=False, via="chat", shown_hash=rejected.shown_hash)

    for approval in (pending, rejected):
        response = api_as(alice).post(f"approvals/{approval.pk}/ask-again")
        assert response.status_code == 409 and "only an expired approval" in response.json()["detail"]
    assert not Approval.objects.filter(asked_again_from__isnull=False).exists()


def test_ask_again_twice_is_refused(alice, agent, api_as):
    old = expired(alice, agent)
    new_id = api_as(alice).post(f"approvals/{old.pk}/ask-again").json()["id"]
    decide(new_id, user=alice, approve=False, via="chat", shown_hash=old.shown_hash)

    response = api_as(alice).post(f"approvals/{old.pk}/ask-again")

    assert response.status_code == 409 and f"as approval {new_id}" in response.json()["detail"]
    assert Approval.objects.filter(asked_again_from=old).count() == 1


def test_ask_again_is_refused_while_the_conversation_is_busy(alice, agent, api_as):
    old = expired(alice, agent)
    waiting(alice, agent, text="write hi to b.txt")  # another turn of another conversation: no matter
    Conversation.objects.filter(pk=old.conversation_id).update(status=Conversation.Status.RUNNING)

    response = api_as(alice).post(f"approvals/{old.pk}/ask-again")

    assert response.status_code == 409 and "working" in response.json()["detail"]
    assert not Approval.objects.filter(asked_again_from=old).exists()


def test_who_may_ask_again(alice, bob, mallory, agent, api_as):
    old = expired(alice, agent)

    assert api_as(mallory).post(f"approvals/{old.pk}/ask-again").status_code == 404
    assert api_as(bob).post(f"approvals/{old.pk}/ask-again").status_code == 201


def test_an_overdue_approval_the_sweep_missed_is_asked_again(alice, agent, api_as):
    approval = waiting(alice, agent)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert api_as(alice).post(f"approvals/{approval.pk}/ask-again").status_code == 201
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.EXPIRED


def test_an_edited_call_is_asked_again_at_its_edited_version(alice, bob, ops_agent, api_as):
    ops_agent.approval_timeout_seconds = 600
    ops_agent.save()
    [approval] = pending_approvals(start(alice, ops_agent, "delete a.txt"))
    Approval.objects.filter(pk=approval.pk).update(
        edited_arguments={"path": "b.txt"}, edited_arguments_hash="e" * 64, edited_by=bob, edited_at=timezone.now()
    )
    expire_overdue(now=approval.expires_at + timedelta(seconds=1))

    body = api_as(alice).post(f"approvals/{approval.pk}/ask-again").json()

    assert body["shown_hash"] == "e" * 64 and body["edited_by"] == "bob"


def test_an_outside_request_asked_again_is_found_from_the_old_one(alice, agent, api_as):
    agent.approval_timeout_seconds = 600
    agent.save()
    api = api_as(alice)
    asked = api.post("approval-requests", {"agent": agent.slug, "tool": "write_file", "arguments": {"path": "a.txt", "content": "x"}, "reason": "ship it"})
    assert asked.status_code == 201, asked.content
    old = Approval.objects.get(pk=asked.json()["id"])
    expire_overdue(now=old.expires_at + timedelta(seconds=1))

    again = api.post(f"approvals/{old.pk}/ask-again")

    assert again.status_code == 201, again.content
    assert api.get(f"approvals/{old.pk}").json()["asked_again"] == again.json()["id"]
    assert again.json()["summary"]["why"] == "ship it"
    assert Conversation.objects.get(pk=old.conversation_id).status == Conversation.Status.IDLE  # the caller runs it


def test_an_mcp_call_is_not_asked_again(alice, agent, api_as):
    old = expired(alice, agent)
    Conversation.objects.filter(pk=old.conversation_id).update(source=Conversation.Source.MCP)

    response = api_as(alice).post(f"approvals/{old.pk}/ask-again")

    assert response.status_code == 409 and "MCP" in response.json()["detail"]


def test_the_expired_cards_ask_again_button_asks_again_and_the_new_card_is_pushed(alice, agent):
    old = expired(alice, agent)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(conversation_group(old.conversation_id), channel)
    card = fragments.tool_card_html(ToolCall.objects.select_related("approval").get(pk=old.tool_call_id))
    assert ">Ask again</button>" in card

    response = client_for(alice).post(f"/approvals/{old.pk}/ask-again/", headers=HX)

    assert response.status_code == 200
    new = Approval.objects.get(asked_again_from=old)
    assert f"Asked again as approval #{new.pk}" in response.content.decode()
    pushed = ""
    while f'id="tool-call-{new.tool_call_id}"' not in pushed:
        pushed += async_to_sync(layer.receive)(channel)["html"]
    assert f"the same call as approval #{old.pk}" in pushed


def test_the_cards_ask_again_refused_says_why(alice, agent):
    old = expired(alice, agent)
    Conversation.objects.filter(pk=old.conversation_id).update(status=Conversation.Status.RUNNING)

    response = client_for(alice).post(f"/approvals/{old.pk}/ask-again/", headers=HX)

    assert response.status_code == 409
    assert "The agent is working in this conversation" in response.content.decode()


# --- Late decisions ---------------------------------------------------------------------------


def test_a_late_decision_on_the_card_is_refused_kept_and_shown(alice, bob, agent):
    old = expired(alice, agent)

    response = client_for(bob).post(f"/approvals/{old.pk}/decide/", {"decision": "approve", "shown_hash": old.shown_hash}, headers=HX)

    assert response.status_code == 409
    assert list(LateDecision.objects.values_list("user__username", "via", "decision")) == [("bob", "chat", "approve")]
    assert "bob tried to approve at " in response.content.decode() and "after it expired" in response.content.decode()
    assert Approval.objects.get(pk=old.pk).status == Approval.Status.EXPIRED


def test_a_late_bulk_decision_is_kept_for_each_expired_one(alice, bob, agent, api_as):
    old = expired(alice, agent)
    overdue = waiting(alice, agent, text="write hi to b.txt")
    Approval.objects.filter(pk=overdue.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = api_as(bob).post("approvals/decisions", {"decision": "reject", "ids": [old.pk, overdue.pk]})

    assert response.status_code == 200 and sorted(response.json()["already_decided"]) == [old.pk, overdue.pk]
    late = sorted(LateDecision.objects.values_list("approval_id", "user__username", "via", "decision"))
    assert late == [(old.pk, "bob", "api", "reject"), (overdue.pk, "bob", "api", "reject")]
    assert Approval.objects.get(pk=overdue.pk).status == Approval.Status.EXPIRED


def test_a_late_group_decision_is_kept_though_nothing_is_decided(alice, bob, agent):
    old = expired(alice, agent)

    response = client_for(bob).post("/approvals/group/", {"decision": "approve", "approval_ids": [f"{old.pk}:{old.shown_hash}"]}, headers=HX)

    assert response.status_code == 409
    assert list(LateDecision.objects.values_list("user__username", "via")) == [("bob", "dashboard")]


def test_a_late_edit_is_kept_as_late(alice, bob, agent):
    old = expired(alice, agent)

    response = client_for(bob).post(f"/approvals/{old.pk}/edit/", {"shown_hash": old.shown_hash, "path": "b.txt", "content": "x"}, headers=HX)

    assert response.status_code == 409
    assert list(LateDecision.objects.values_list("user__username", "decision")) == [("bob", "approve")]


def test_a_decision_racing_the_deadline_is_late_not_a_timeout(alice, agent):
    approval = waiting(alice, agent)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(AlreadyDecided):
        decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)
    outcome = decide_many({approval.pk: ""}, user=alice, approve=True, via="dashboard")

    assert outcome.late == [approval.pk]
    assert list(LateDecision.objects.values_list("via", flat=True)) == ["api", "dashboard"]


def test_a_decision_by_a_rule_or_the_system_is_never_late(alice, agent):
    approval = expired(alice, agent)

    services.record_late([approval.pk], user=None, via="rule", approve=True)
    services.record_late([approval.pk], user=alice, via="", approve=True)

    assert not LateDecision.objects.exists()


# --- The audit --------------------------------------------------------------------------------


@pytest.fixture
def auditor(db):
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="root-password"))
    return client


def test_auditors_see_the_extension_the_late_decisions_and_the_ask_again(alice, bob, agent, auditor, api_as):
    old = waiting(alice, agent)
    extend(old.pk, user=bob, via="dashboard")
    old.refresh_from_db()
    expire_overdue(now=old.expires_at + timedelta(seconds=1))
    api_as(bob).post(f"approvals/{old.pk}/decision", {"decision": "approve", "shown_hash": old.shown_hash})
    new_id = api_as(alice).post(f"approvals/{old.pk}/ask-again").json()["id"]

    page = auditor.get(f"/admin/approvals/approval/{old.pk}/change/").content.decode()
    assert "extended once by bob" in page and f"approval #{new_id} (pending)" in page
    assert "Late decision" in page and "approve" in page
    listed = auditor.get("/admin/approvals/latedecision/").content.decode()
    assert "bob" in listed and "write_file" in listed
    assert auditor.post(f"/admin/approvals/latedecision/{LateDecision.objects.get().pk}/delete/").status_code == 403

    export = auditor.post("/admin/approvals/approval/", {"action": "export_csv", "_selected_action": [old.pk, new_id]}).content.decode()
    rows = {row["id"]: row for row in csv.DictReader(io.StringIO(export))}
    assert rows[str(old.pk)]["extended_by"] == "bob" and rows[str(old.pk)]["late_decisions"].startswith("bob approve via api at ")
    assert rows[str(new_id)]["asked_again_from"] == str(old.pk)


def test_an_expired_question_is_asked_again_and_its_answer_reaches_the_model(alice, agent, api_as):
    old = expired(alice, agent, text="ask me what to call the file")
    assert old.kind == Approval.Kind.QUESTION

    new = api_as(alice).post(f"approvals/{old.pk}/ask-again").json()
    assert (new["kind"], new["question"]["text"]) == ("question", "what to call the file")
    response = api_as(alice).post(f"approvals/{new['id']}/answer", {"answer": "notes.txt", "shown_hash": new["shown_hash"]})

    assert response.status_code == 200, response.content
    assert Conversation.objects.get(pk=old.conversation_id).messages.last().content == "You answered: notes.txt."
    assert Conversation.objects.get(pk=old.conversation_id).status == Conversation.Status.IDLE
