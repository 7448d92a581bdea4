"""One summary of a pending call (approvals.summary): the sentence names what Approve does and its
target, who asked and why, and whether the whole call fits a channel; the API's `summary` is it.
A decision through a message that showed the call cut can reject, never approve."""
import pytest

from approvals import tokens
from approvals.models import Approval, LateDecision
from approvals.services import AlreadyDecided, ShownCut, check_decidable, decide
from approvals.summary import MAX_SENTENCE_CHARS, summarize
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def one(alice, agent, text) -> Approval:
    [approval] = pending_approvals(start(alice, agent, text))
    return Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=approval.pk)


def test_a_write_names_the_path_and_the_bytes_and_who_asked(alice, agent):
    summary = summarize(one(alice, agent, "write #!/bin/sh echo hi to setup.sh"))

    assert "setup.sh" in summary.sentence and "bytes" in summary.sentence and str(len("#!/bin/sh echo hi")) in summary.sentence
    assert summary.requester == "alice" and summary.agent == agent.name
    assert summary.head.startswith("Approve? Write setup.sh") and "asked by alice (" in summary.head
    assert summary.why and summary.why != "write_file"
    assert '"content": "#!/bin/sh echo hi"' in summary.arguments


def test_a_fetch_names_the_whole_url(alice, agent):
    url = "https://attacker.test/x/y?token=1&z=%22"
    summary = summarize(one(alice, agent, f"fetch {url}"))

    assert url in summary.sentence
    assert "attacker.test is not on the agent's allowlist" in summary.why


def test_a_delete_and_an_email_name_their_target(alice, agent):
    assert "a.txt" in summarize(one(alice, agent, "delete a.txt")).sentence
    email = summarize(one(alice, agent, "email bob@example.com about lunch"))
    assert email.sentence == "Send an email to bob@example.com about lunch"
    assert email.why not in ("", "send_email")


def test_the_details_fit_or_not_and_a_cut_sentence_never_fits(alice, agent):
    small = summarize(one(alice, agent, "write hi to a.txt"))
    assert small.fits(2000) and not small.fits(20)

    long = summarize(one(alice, agent, "fetch https://example.org/" + "a" * 1900))
    assert len(long.sentence) == MAX_SENTENCE_CHARS and not long.sentence_whole
    assert not long.fits(10**6)


def test_invisible_characters_are_revealed_in_the_sentence(alice, agent):
    summary = summarize(one(alice, agent, "write hi to a\u202e.txt"))
    assert "\u202e" not in summary.sentence and "U+202E" in summary.sentence


def test_every_approval_in_the_api_has_its_summary(alice, bob, agent, api_as):
    approval = one(alice, agent, "write hello to notes.txt")

    body = api_as(alice).get(f"approvals/{approval.pk}").json()
    listed = api_as(alice).get("approvals").json()["items"]

    assert set(body["summary"]) == {"sentence", "requester", "agent", "why"}
    assert "notes.txt" in body["summary"]["sentence"] and "5 bytes" in body["summary"]["sentence"]
    assert body["summary"]["requester"] == "alice" and body["summary"]["why"] not in ("", "write_file")
    assert listed[0]["summary"] == body["summary"]


def test_a_message_that_showed_the_call_cut_can_reject_never_approve(alice, bob, agent):
    approval = one(alice, agent, "write hello to notes.txt")

    with pytest.raises(ShownCut):
        check_decidable(approval.pk, alice, approve=True, shown_hash=approval.shown_hash, shown_whole=False)
    with pytest.raises(ShownCut):
        decide(approval.pk, user=alice, approve=True, via="slack", shown_hash=approval.shown_hash, shown_whole=False)
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING

    rejected = decide(approval.pk, user=alice, approve=False, via="slack", shown_hash=approval.shown_hash, shown_whole=False, reason="no")
    assert rejected.status == Approval.Status.REJECTED


def test_a_cut_token_cannot_approve_and_stays_unspent(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    token = tokens.issue(approval, alice, channel="push", complete=False)

    with pytest.raises(ShownCut):
        tokens.redeem(token, approve=True)
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert tokens.redeem(token, approve=False, reason="not this").status == Approval.Status.REJECTED


def test_a_decision_after_the_expiry_is_refused_and_kept_as_late(alice, agent, api_as):
    from datetime import timedelta

    from django.utils import timezone

    approval = one(alice, agent, "write hello to notes.txt")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash})
    assert response.status_code == 409 and "expired" in response.json()["detail"]
    with pytest.raises(AlreadyDecided):
        decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)

    late = list(LateDecision.objects.filter(approval=approval).values_list("user__username", "via", "decision"))
    assert late == [("alice", "api", "approve"), ("alice", "chat", "reject")]
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.EXPIRED


def test_an_outside_agents_request_names_the_call_its_arguments_and_who_asked(alice, agent, api_as):
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.save()
    body = api_as(alice).post(
        "approval-requests", {"agent": agent.slug, "tool": "deploy", "arguments": {"service": "api", "version": "1.4"}, "reason": "Ship the fix"}
    ).json()

    summary = body["summary"]
    assert summary["sentence"] == f"Call deploy on {agent.name} with service=api, version=1.4"
    assert summary["requester"] == "alice" and summary["why"] == "Ship the fix"
    approval = Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=body["id"])
    assert summarize(approval).asked_by == f"an outside agent of alice, through {agent.name}"


def test_late_decisions_are_kept_a_few_times_per_person_then_only_logged(alice, agent):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.services import MAX_LATE_KEPT

    approval = one(alice, agent, "write hello to notes.txt")
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for _ in range(MAX_LATE_KEPT + 5):
        with pytest.raises(AlreadyDecided):
            decide(approval.pk, user=alice, approve=True, via="api", shown_hash=approval.shown_hash)

    assert LateDecision.objects.filter(approval=approval).count() == MAX_LATE_KEPT


def test_a_channel_failing_on_a_warning_never_keeps_the_others_from_it(alice, agent, settings):
    from datetime import timedelta

    from django.utils import timezone

    from approvals.services import warn_expiring
    from approvals.signals import approvals_expiring

    approval = one(alice, agent, "write hello to notes.txt")
    Approval.objects.filter(pk=approval.pk).update(warn_at=timezone.now() - timedelta(seconds=1), expires_at=timezone.now() + timedelta(minutes=5))
    heard = []

    def failing(**kwargs):
        raise RuntimeError("a channel's bug")

    def listening(approvals, **kwargs):
        heard.extend(a.pk for a in approvals)

    approvals_expiring.connect(failing, weak=False)
    approvals_expiring.connect(listening, weak=False)
    try:
        assert warn_expiring() == [approval.pk]
    finally:
        approvals_expiring.disconnect(failing)
        approvals_expiring.disconnect(listening)
    assert heard == [approval.pk]
