"""Single-use signed decision tokens (approvals.tokens), for the surfaces that decide outside the
site (an email link, a notification's action): bound to an approval, its version, its recipient
and an expiry; redeemed through the decision service, once."""
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import tokens
from approvals.models import Approval, DecisionToken
from approvals.services import AlreadyDecided, ArgumentsChanged, ConfirmationRequired, NotAllowed, decide
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


def a_call(alice, agent, text="write hi to a.txt") -> Approval:
    [approval] = pending_approvals(start(alice, agent, text))
    return approval


def test_a_token_decides_once_as_its_recipient_through_its_channel(alice, agent):
    approval = a_call(alice, agent)
    token = tokens.issue(approval, alice, channel="email")

    decided = tokens.redeem(token, approve=True)

    assert decided.status == Approval.Status.APPROVED and decided.decided_by == alice and decided.decided_via == "email"
    with pytest.raises(tokens.TokenUsed):
        tokens.redeem(token, approve=False)


def test_a_tampered_or_foreign_token_is_invalid(alice, agent):
    approval = a_call(alice, agent)
    token = tokens.issue(approval, alice, channel="push")

    for forged in (token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "nonsense", "", token + "x"):
        with pytest.raises(tokens.TokenInvalid):
            tokens.redeem(forged, approve=True)
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING


def test_a_token_names_its_nonce_a_guessed_id_with_another_nonce_is_invalid(alice, agent):
    from django.core import signing

    approval = a_call(alice, agent)
    tokens.issue(approval, alice, channel="email")
    row = DecisionToken.objects.get()
    guessed = signing.dumps({"t": row.pk, "n": "0" * 32}, salt=tokens.SALT)

    with pytest.raises(tokens.TokenInvalid):
        tokens.redeem(guessed, approve=True)


def test_a_call_edited_since_the_message_is_not_decided(alice, agent):
    approval = a_call(alice, agent)
    token = tokens.issue(approval, alice, channel="email")
    # An edit stored since (as a stricter edit leaves it: pending, another version shown).
    Approval.objects.filter(pk=approval.pk).update(edited_arguments={"path": "b.txt", "content": "hi"}, edited_arguments_hash="e" * 64)

    with pytest.raises(ArgumentsChanged):
        tokens.redeem(token, approve=True)
    assert tokens.open_token(token).changed
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING


def test_decided_elsewhere_first_the_token_says_so_and_decides_nothing(alice, agent):
    approval = a_call(alice, agent)
    token = tokens.issue(approval, alice, channel="push")
    decide(approval.pk, user=alice, approve=False, via="api", shown_hash="", reason="no")

    with pytest.raises(AlreadyDecided) as refused:
        tokens.redeem(token, approve=True)
    assert refused.value.approval.status == Approval.Status.REJECTED


def test_a_token_expires_after_its_own_lifetime(alice, agent):
    agent.approval_timeout_seconds = 60
    agent.save()
    approval = a_call(alice, agent)
    token = tokens.issue(approval, alice, channel="email")

    # Its own lifetime: the approval's deadline (which an extend moves) is the decision service's,
    # and a press after it is kept as late (tests/security/test_summary_attacks.py).
    assert DecisionToken.objects.get().expires_at > approval.expires_at
    DecisionToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(tokens.TokenExpired):
        tokens.redeem(token, approve=True)


def test_a_critical_call_needs_its_confirmation_and_a_refusal_leaves_the_token_usable(alice, agent):
    from chat.models import ToolCall

    approval = a_call(alice, agent)
    Approval.objects.filter(pk=approval.pk).update(risk="critical", confirmation_hint="a.txt")
    token = tokens.issue(Approval.objects.get(pk=approval.pk), alice, channel="email")

    with pytest.raises(ConfirmationRequired):
        tokens.redeem(token, approve=True)
    assert DecisionToken.objects.get().used_at is None
    assert tokens.redeem(token, approve=True, confirmation="a.txt").status == Approval.Status.APPROVED


def test_a_token_gives_no_power_its_recipient_lacks(alice, mallory, agent):
    approval = a_call(alice, agent)
    token = tokens.issue(approval, mallory, channel="email")  # a token issued to the wrong person by mistake

    with pytest.raises(NotAllowed):
        tokens.redeem(token, approve=True)
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING


def test_a_link_whose_recipient_lost_the_right_to_decide_is_refused_on_the_page_and_by_the_service_worker(alice, bob, agent, client):
    import json

    from django.contrib.auth.models import Permission

    approval = a_call(alice, agent, "email carol@example.com about tea")
    Approval.objects.filter(pk=approval.pk).update(approver_required=True)
    emailed = tokens.issue(Approval.objects.get(pk=approval.pk), bob, channel="email")
    pushed = tokens.issue(Approval.objects.get(pk=approval.pk), bob, channel="push")
    bob.user_permissions.remove(Permission.objects.get(codename="decide_approval"))

    page = client.post(f"/approve/{emailed}/", {"decision": "approve"})
    worker = client.post("/push/decide", json.dumps({"token": pushed, "decision": "approve"}), content_type="application/json")

    assert page.status_code == 403 and worker.status_code == 403
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
