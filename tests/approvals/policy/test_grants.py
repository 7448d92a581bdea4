"""Time-boxed grants (issue 28, item 5): a card's "Approve for 10 minutes in this conversation" (or
1 hour) approves the call and saves an allow rule of the call's own conditions, in that conversation,
that expires by itself. Later identical calls there run unasked until then; then they ask again.
Never offered, and refused on the server, for what no allow rule approves (critical, four eyes, a
route). The card and the rules page say how long is left. Attacked as an outsider would, too."""
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from approvals.models import Approval, Rule
from approvals.deciders.routemaking import create_route
from chat import services
from chat.models import Conversation
from tests.conftest import client_for, pending_approvals, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
TEN_MINUTES = "Approve for 10 minutes in this conversation"
ONE_HOUR = "Approve for 1 hour in this conversation"


def grant(user, approval: Approval, choice: str = "10m", *, via: str = "", **extra):
    path = f"/approvals/dashboard/{approval.pk}/decide/" if via == "dashboard" else f"/approvals/{approval.pk}/decide/"
    body = {"decision": "approve", "grant": choice, "shown_hash": approval.shown_hash, **extra}
    return client_for(user).post(path, body, headers=HTMX)


def say(user, conversation: Conversation, text: str) -> Approval:
    """Post `text` in the conversation; the approval of the call it makes."""
    services.post_message(conversation=conversation, user=user, content=text)
    return Approval.objects.filter(conversation=conversation).order_by("-pk").first()


def assert_nothing_done(approval: Approval) -> None:
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert not Rule.objects.exists()


# --- What a grant does -------------------------------------------------------------------------------


def test_a_grant_approves_the_call_and_saves_an_expiring_rule_of_its_conditions_in_this_conversation(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    before = timezone.now()

    response = grant(alice, approval)

    assert response.status_code == 200
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by, approval.decided_via) == ("approved", alice, "chat")
    rule = Rule.objects.get()
    assert (rule.effect, rule.tool, rule.arguments, rule.scope, rule.conversation_id, rule.created_by) == (
        "allow", "write_file", {"path": "notes/*"}, "conversation", conversation.pk, alice
    )
    assert before + timedelta(minutes=10) <= rule.expires_at <= timezone.now() + timedelta(minutes=10)
    assert rule.note == "allow write_file path notes/* for 10 minutes in this conversation"
    html = response.content.decode()
    assert f"Saved as rule #{rule.pk}: allow write_file path notes/* for 10 minutes in this conversation" in html


def test_a_one_hour_grant_expires_in_an_hour(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    before = timezone.now()
    assert grant(alice, approval, "1h").status_code == 200
    rule = Rule.objects.get()
    assert before + timedelta(hours=1) <= rule.expires_at <= timezone.now() + timedelta(hours=1)
    assert rule.note == "allow write_file path notes/* for 1 hour in this conversation"


def test_a_grant_approves_later_identical_calls_in_that_conversation_until_it_expires_then_they_ask_again(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    assert grant(alice, approval).status_code == 200
    rule = Rule.objects.get()

    again = say(alice, conversation, "write hi to notes/a.txt")
    assert (again.status, again.decided_via, again.rule_id) == ("approved", "rule", rule.pk)
    elsewhere = start_conversation(alice, agent, "write hi to notes/a.txt")  # another conversation: asked
    assert len(pending_approvals(elsewhere)) == 1

    Rule.objects.filter(pk=rule.pk).update(expires_at=timezone.now() - timedelta(seconds=1))  # the time is up
    after = say(alice, conversation, "write hi to notes/a.txt")

    assert after.status == Approval.Status.PENDING and after.rule_id is None
    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL


def test_an_approver_grants_from_the_dashboard_for_the_owners_conversation(alice, bob, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    assert TEN_MINUTES in client_for(bob).get("/approvals/").content.decode()

    assert grant(bob, approval, via="dashboard").status_code == 200

    rule = Rule.objects.get()
    assert (rule.scope, rule.conversation_id, rule.created_by) == ("conversation", conversation.pk, bob)
    approval.refresh_from_db()
    assert (approval.decided_by, approval.decided_via) == (bob, "dashboard")


def test_the_card_offers_both_grants_with_the_conditions_they_will_hold(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert TEN_MINUTES in page and ONE_HOUR in page
    assert 'name="grant" value="10m"' in page and 'name="grant" value="1h"' in page
    assert "calls of <code>write_file</code> with path <code>notes/*</code> run without asking, in this conversation only" in page


# --- Never for what a rule may not approve ------------------------------------------------------------


def critical_call(alice, agent) -> tuple[Conversation, Approval]:
    conversation = start_conversation(alice, agent, "delete all files")
    [approval] = pending_approvals(conversation)
    assert approval.risk == "critical"
    return conversation, approval


def test_no_grant_for_a_critical_call(alice, agent):
    conversation, approval = critical_call(alice, agent)
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert TEN_MINUTES not in page and ONE_HOUR not in page

    response = grant(alice, approval, confirmation="DELETE")

    assert response.status_code == 400 and "critical" in response.content.decode()
    assert_nothing_done(approval)


def test_no_grant_for_a_four_eyes_call_even_by_an_approver(alice, bob, ops_agent):
    conversation = start_conversation(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.approver_required
    assert TEN_MINUTES not in client_for(bob).get("/approvals/").content.decode()

    response = grant(bob, approval, via="dashboard")

    assert response.status_code == 400 and "four-eyes" in response.content.decode()
    assert_nothing_done(approval)


def test_no_grant_for_a_routed_call(alice, agent, carol):
    Group.objects.get_or_create(name="finance")
    carol.groups.add(Group.objects.get(name="finance"))
    create_route(created_by=None, agent=agent.slug, tool="delete_file", approvers=["finance"], quorum=1)
    conversation = start_conversation(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.route_id is not None

    response = grant(carol, approval, via="dashboard")

    assert response.status_code == 400 and "routed" in response.content.decode()
    assert_nothing_done(approval)


def test_no_grant_for_an_edit_that_made_the_call_critical(alice, agent):
    """The version shown decides: the card's edit, not the request it replaced."""
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    Approval.objects.filter(pk=approval.pk).update(risk="critical")  # as a stricter edit would leave it
    approval.refresh_from_db()
    assert grant(alice, approval).status_code == 400
    assert_nothing_done(approval)


def test_no_grant_for_a_call_that_needs_a_passkey(alice, agent):
    """Approving it needs the approver's passkey; a grant would let the next ones through without one."""
    agent.step_up_from_risk, agent.max_auto_approve_risk = "high", "high"
    agent.save()
    conversation = start_conversation(alice, agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.risk == "high" and not approval.rule_suggestion["may_allow"]  # no allow rule approves it either
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert TEN_MINUTES not in page

    response = grant(alice, approval)

    assert response.status_code == 400 and "passkey" in response.content.decode()
    assert_nothing_done(approval)


# --- Remaining time -------------------------------------------------------------------------------------


def test_the_rules_page_says_how_long_a_grant_has_left_and_when_it_ran_out(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    assert grant(alice, approval).status_code == 200
    live = Rule.objects.get()
    Rule.objects.filter(pk=live.pk).update(expires_at=timezone.now() + timedelta(minutes=9, seconds=30))
    over = Rule.objects.create(effect="allow", tool="read_file", scope="conversation", conversation=conversation,
                               created_by=alice, expires_at=timezone.now() - timedelta(minutes=1))
    forever = Rule.objects.create(effect="deny", tool="send_email", scope="conversation", conversation=conversation, created_by=alice)

    page = client_for(alice).get("/rules/").content.decode()

    row = lambda rule: page[page.index(f'id="rule-{rule.pk}"'):].split("</tr>")[0]  # noqa: E731
    assert "expires in" in row(live) and ">9\xa0minutes</time>" in row(live)
    assert "expired <time" in row(over) and "expires in" not in row(over)
    assert "expires: never" in row(forever)


def test_the_cards_saved_rule_line_says_how_long_the_grant_has_left(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    html = grant(alice, approval).content.decode()
    rule = Rule.objects.get()
    assert f"Saved as rule #{rule.pk}: allow write_file path notes/* for 10 minutes in this conversation (expires in <time" in html
    assert "\xa0minutes</time>)." in html


def test_a_later_call_the_grant_approved_says_how_long_the_grant_has_left(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    assert grant(alice, approval).status_code == 200
    rule = Rule.objects.get()
    say(alice, conversation, "write ho to notes/b.txt")

    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()

    assert f"Allowed by rule #{rule.pk}: allow write_file path notes/* for 10 minutes in this conversation (expires in <time" in page


# --- Attacks ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    {"grant": "5y"},  # not a grant the card offers
    {"grant": "10m", "decision": "reject"},  # a grant approves
    {"grant": "10m", "remember_scope": "global"},  # a grant is this conversation's only
    {"grant": "10m", "cond:path": "*"},  # with the call's own conditions, not wider ones
    {"grant": "\x00"},
])
def test_a_grant_not_as_the_card_offers_it_is_a_400_and_nothing_is_done(alice, agent, body):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    response = client_for(alice).post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "shown_hash": approval.shown_hash, **body}, headers=HTMX
    )
    assert response.status_code == 400
    assert_nothing_done(approval)


def test_another_users_approval_is_a_404_and_without_a_session_nothing_happens(alice, mallory, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)

    assert grant(mallory, approval).status_code == 404
    from django.test import Client

    anonymous = Client().post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "grant": "10m"})
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    assert grant(alice, Approval(pk=10**9, arguments_hash="x")).status_code == 404
    assert_nothing_done(approval)


def test_a_grant_needs_the_pages_csrf_token(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    response = client_for(alice, csrf=True).post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "grant": "10m"})
    assert response.status_code == 403
    assert_nothing_done(approval)


def test_a_grant_replayed_saves_one_rule(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    assert grant(alice, approval).status_code == 200
    assert grant(alice, approval).status_code == 409  # already decided: no second rule
    assert Rule.objects.count() == 1


def test_a_grant_for_a_version_no_longer_shown_is_refused(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    response = client_for(alice).post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "grant": "10m", "shown_hash": "0" * 64}, headers=HTMX
    )
    assert response.status_code in (400, 409)
    assert_nothing_done(approval)


# --- The same through the JSON API: `remember.expires_at` ---------------------------------------------------


def test_the_api_makes_a_grant_with_remember_expires_at(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    until = timezone.now() + timedelta(minutes=10)
    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {
        "decision": "approve", "shown_hash": approval.shown_hash,
        "remember": {"scope": "conversation", "expires_at": until.isoformat()},
    })
    assert response.status_code == 200, response.json()
    rule = Rule.objects.get()
    assert (rule.scope, rule.conversation_id, rule.arguments, rule.expires_at) == ("conversation", conversation.pk, {"path": "notes/*"}, until)
    assert say(alice, conversation, "write hi to notes/a.txt").rule_id == rule.pk


@pytest.mark.parametrize("value, status", [
    ("2030-01-01T00:00:00", 200),  # no zone: read as the site's (UTC), never a 500
    ("2001-01-01T00:00:00Z", 400),  # in the past
    ("0001-01-01T00:00:00Z", 400),
    ("garbage", 422),
    (5, 400),  # seconds since 1970: in the past
])
def test_the_apis_expires_at_is_read_or_refused_clearly(alice, agent, api_as, value, status):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {
        "decision": "approve", "shown_hash": approval.shown_hash, "remember": {"scope": "conversation", "expires_at": value},
    })
    assert response.status_code == status, response.content
    approval.refresh_from_db()
    if status == 200:
        assert Rule.objects.get().expires_at == timezone.make_aware(timezone.datetime(2030, 1, 1))
    else:
        assert_nothing_done(approval)
