"""Routes, quorum, escalation and delegation (issue 25, items 1-4): who may see and decide a routed
call, how many must approve it, when it is reminded and escalated, and decisions through a
delegation, all through approvals.services and the JSON API's contract, chained in the audit."""
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.utils import timezone

from approvals import audit
from approvals.deciders import escalation, routing
from approvals.models import Approval, Delegation, PolicyVersion, Route, Vote, WebhookDelivery, Webhook
from approvals.deciders.routemaking import create_route
from chat.models import ToolCall
from tests.approvals.conftest import member
from tests.conftest import pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def finance():
    """Three finance approvers and an on-call lead (the escalation group), none a global approver."""
    return SimpleNamespace(
        dana=member("dana", "finance"), erin=member("erin", "finance"), fred=member("fred", "finance"),
        olga=member("olga", "oncall"),
    )


@pytest.fixture
def router_user(db):
    user = User.objects.create_user("rita", password="rita-password")
    user.user_permissions.add(Permission.objects.get(codename="manage_route"))
    return User.objects.get(pk=user.pk)


def route(agent, **fields) -> Route:
    fields = {"approvers": ["finance"], "quorum": 2, **fields}
    for name in fields["approvers"] + list(fields.get("escalate_to", [])):
        Group.objects.get_or_create(name=name)
    return create_route(created_by=None, agent=agent.slug, **fields)


def routed_call(alice, agent, text: str = "delete a.txt") -> Approval:
    [approval] = pending_approvals(start(alice, agent, text))
    return approval


def vote(api_as, user, approval, decision: str = "approve", **body):
    return api_as(user).post(f"approvals/{approval.pk}/decision", {"decision": decision, **body})


# --- matching ------------------------------------------------------------------------------------


def fake_route(pk: int, tool: str, min_risk: str = "low") -> Route:
    return Route(pk=pk, tool=tool, min_risk=min_risk)


def test_the_most_specific_route_applies_a_tool_pattern_beats_star_and_higher_risk_beats_lower():
    star, star_high = fake_route(1, "*"), fake_route(2, "*", "high")
    files, delete = fake_route(3, "*_file"), fake_route(4, "delete_file")
    routes = [star, star_high, files, delete]

    assert routing.match(routes, tool="delete_file", risk="high") == delete  # a plain name beats any glob
    assert routing.match(routes, tool="write_file", risk="medium") == files  # a glob beats `*`
    assert routing.match(routes, tool="send_email", risk="high") == star_high  # higher minimum risk beats lower
    assert routing.match(routes, tool="send_email", risk="medium") == star
    assert routing.match([star_high], tool="send_email", risk="medium") is None  # below every minimum: unrouted
    assert routing.match([fake_route(5, "*", "low"), fake_route(6, "*", "low")], tool="x", risk="low").pk == 5  # the oldest breaks a tie


def test_a_routed_call_names_its_route_and_quorum_and_needs_an_approver(alice, agent, finance):
    made = route(agent, tool="delete_file")

    approval = routed_call(alice, agent)
    unrouted = routed_call(alice, agent, "write hi to a.txt")

    assert (approval.route_id, approval.quorum, approval.approver_required) == (made.pk, 2, True)
    assert (unrouted.route_id, unrouted.quorum) == (None, 1)


def test_no_route_keeps_todays_behaviour_the_owner_approves_their_own_call(alice, agent, api_as):
    approval = routed_call(alice, agent, "write hi to a.txt")

    response = vote(api_as, alice, approval)

    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert response.json()["route"] is None and response.json()["quorum"] == 1 and response.json()["votes"] == []


def test_an_allow_rule_never_approves_a_routed_call_a_deny_rule_still_rejects_it(alice, agent, finance):
    from approvals.models import Rule

    route(agent, tool="delete_file")
    Rule.objects.create(effect="allow", tool="delete_file", scope="agent_user", agent=agent, created_by=alice)

    assert routed_call(alice, agent).status == Approval.Status.PENDING
    Rule.objects.create(effect="deny", tool="delete_file", scope="agent_user", agent=agent, created_by=alice)
    start(alice, agent, "delete b.txt")
    [denied] = Approval.objects.filter(status=Approval.Status.REJECTED, decided_via=Approval.Via.RULE)
    assert denied.route_id is not None  # routed, and rejected at once by the deny rule


# --- quorum --------------------------------------------------------------------------------------


def test_two_of_three_a_vote_below_quorum_leaves_it_pending_the_second_distinct_vote_approves(alice, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent, "write hi to a.txt")

    first = vote(api_as, finance.dana, approval, comment="checked the amount")

    assert first.status_code == 200 and first.json()["status"] == "pending"
    [counted] = first.json()["votes"]
    assert counted["user"] == "dana" and counted["via"] == "api" and counted["comment"] == "checked the amount"
    assert counted["on_behalf_of"] is None and counted["decided_at"]
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.PENDING_APPROVAL

    again = vote(api_as, finance.dana, approval)
    assert again.status_code == 409 and "already" in again.json()["detail"]

    second = vote(api_as, finance.erin, approval)
    assert second.status_code == 200 and second.json()["status"] == "approved"
    assert [v["user"] for v in second.json()["votes"]] == ["dana", "erin"] and second.json()["decided_by"] == "erin"
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED
    third = vote(api_as, finance.fred, approval)
    assert third.status_code == 409


def test_one_eligible_reject_rejects_a_quorum_call(alice, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent)
    vote(api_as, finance.dana, approval)

    response = vote(api_as, finance.erin, approval, "reject", reason="wrong account")

    assert response.status_code == 200 and response.json()["status"] == "rejected"
    assert ToolCall.objects.get(pk=approval.tool_call_id).status != ToolCall.Status.SUCCEEDED


def test_the_requester_never_counts_even_as_a_member_of_the_group(agent, finance, api_as):
    owner = member("owen", "finance")
    route(agent)
    approval = routed_call(owner, agent)

    assert vote(api_as, owner, approval).status_code == 403
    assert Vote.objects.count() == 0


def test_who_may_see_but_not_decide_gets_403_who_may_not_see_gets_404(alice, bob, mallory, agent, finance, api_as):
    route(agent, escalate_after_seconds=600, escalate_to=["oncall"])
    approval = routed_call(alice, agent)

    assert vote(api_as, alice, approval).status_code == 403  # the owner approving a routed call
    assert vote(api_as, bob, approval).status_code == 403  # a global approver outside the route's groups
    assert vote(api_as, finance.olga, approval).status_code == 403  # the escalation group before escalation
    assert vote(api_as, mallory, approval).status_code == 404
    assert api_as(bob).get(f"approvals?status=pending").json()["count"] == 1  # global approvers see routed calls
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING and Vote.objects.count() == 0


def test_the_owner_may_always_reject_a_routed_call(alice, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent)

    response = vote(api_as, alice, approval, "reject", reason="not now")

    assert response.status_code == 200 and response.json()["status"] == "rejected"


def test_a_route_member_sees_what_the_route_sends_them_and_nothing_else(alice, agent, finance, api_as):
    route(agent, tool="delete_file")
    routed = routed_call(alice, agent)
    routed_call(alice, agent, "write hi to a.txt")  # unrouted: the owner's, or a global approver's

    listed = api_as(finance.dana).get("approvals").json()

    assert [item["id"] for item in listed["items"]] == [routed.pk]


def test_bulk_decisions_cast_votes_through_the_same_service(alice, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent)

    response = api_as(finance.dana).post("approvals/decisions", {"decision": "approve", "ids": [approval.pk]})

    assert response.status_code == 200
    assert response.json()["decided"] == [] and [a["id"] for a in response.json()["voted"]] == [approval.pk]
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert list(Vote.objects.values_list("user__username", flat=True)) == ["dana"]


def test_an_edit_makes_earlier_votes_moot_they_were_for_another_version(alice, agent, finance, api_as):
    route(agent, tool="write_file")
    approval = routed_call(alice, agent, "write hi to a.txt")
    vote(api_as, finance.dana, approval)

    edited = api_as(finance.erin).post(
        f"approvals/{approval.pk}/decision",
        {"decision": "approve", "arguments": {"path": "b.txt", "content": "hi"}, "shown_hash": approval.shown_hash},
    )

    assert edited.status_code == 200 and edited.json()["status"] == "pending" and edited.json()["votes"] == []
    new_hash = edited.json()["shown_hash"]
    assert vote(api_as, finance.erin, approval, shown_hash=new_hash).status_code == 403  # who edited does not also check
    assert vote(api_as, finance.dana, approval, shown_hash=new_hash).json()["status"] == "pending"
    assert vote(api_as, finance.fred, approval, shown_hash=new_hash).json()["status"] == "approved"


# --- the routes API ------------------------------------------------------------------------------


def test_the_routes_api_echoes_every_field_defaults_included(router_user, agent, api_as):
    Group.objects.create(name="finance")

    response = api_as(router_user).post("routes", {"agent": agent.slug, "approvers": ["finance"]})

    assert response.status_code == 201
    body = response.json()
    assert body["id"] and {k: body[k] for k in body if k not in ("id", "created_at")} == {
        "agent": agent.slug, "tool": "*", "min_risk": "low", "approvers": ["finance"], "quorum": 1,
        "remind_after_seconds": None, "escalate_after_seconds": None, "escalate_to": [], "created_by": "rita",
    }
    assert [r["id"] for r in api_as(router_user).get("routes").json()["items"]] == [body["id"]]


def test_unknown_agents_and_groups_are_named_and_others_get_403(router_user, alice, bob, agent, api_as):
    Group.objects.create(name="finance")

    unknown_agent = api_as(router_user).post("routes", {"agent": "nope", "approvers": ["finance"]})
    unknown_group = api_as(router_user).post("routes", {"agent": agent.slug, "approvers": ["finance", "treasury"]})

    assert unknown_agent.status_code == 400 and "nope" in unknown_agent.json()["detail"]
    assert unknown_group.status_code == 400 and "treasury" in unknown_group.json()["detail"]
    for user in (alice, bob):  # a global approver is not an operator
        assert api_as(user).post("routes", {"agent": agent.slug, "approvers": ["finance"]}).status_code == 403
        assert api_as(user).get("routes").status_code == 403
    assert Route.objects.count() == 0


def test_a_deleted_route_routes_nothing_new_what_it_routed_keeps_it(router_user, alice, agent, finance, api_as):
    made = api_as(router_user).post("routes", {"agent": agent.slug, "approvers": ["finance"], "quorum": 2}).json()
    routed = routed_call(alice, agent)

    assert api_as(router_user).delete(f"routes/{made['id']}").status_code == 204
    assert api_as(router_user).delete(f"routes/{made['id']}").status_code == 404

    assert routed_call(alice, agent, "write hi to a.txt").route_id is None
    assert Approval.objects.get(pk=routed.pk).route_id == made["id"]
    assert api_as(router_user).get("routes").json()["count"] == 0


# --- delegation ----------------------------------------------------------------------------------


def window(start_minutes: int = -5, end_minutes: int = 60) -> dict:
    now = timezone.now()
    return {
        "starts_at": (now + timedelta(minutes=start_minutes)).isoformat(),
        "ends_at": (now + timedelta(minutes=end_minutes)).isoformat(),
    }


def test_a_vote_through_a_delegation_is_the_delegates_on_behalf_of_the_delegator(alice, mallory, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent)
    made = api_as(finance.dana).post("delegations", {"to": "mallory", **window()})
    assert made.status_code == 201 and made.json()["id"]

    response = vote(api_as, mallory, approval)

    [counted] = response.json()["votes"]
    assert counted["user"] == "mallory" and counted["on_behalf_of"] == "dana"
    again = vote(api_as, finance.dana, approval)  # dana's vote is counted already, through mallory
    assert again.status_code == 409 and "already" in again.json()["detail"]
    assert vote(api_as, finance.erin, approval).json()["status"] == "approved"


def test_after_its_end_or_its_deletion_a_delegates_decision_is_refused(alice, mallory, agent, finance, api_as):
    route(agent)
    first, second = routed_call(alice, agent), routed_call(alice, agent)
    made = api_as(finance.dana).post("delegations", {"to": "mallory", **window()}).json()
    assert vote(api_as, mallory, first).status_code == 200

    assert api_as(finance.dana).delete(f"delegations/{made['id']}").status_code == 204

    assert vote(api_as, mallory, second).status_code in (403, 404)
    assert Delegation.objects.get(pk=made["id"]).ended_at is not None


def test_a_window_not_yet_begun_or_over_gives_nothing(alice, mallory, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent)
    Delegation_window = window(start_minutes=30, end_minutes=60)
    assert api_as(finance.dana).post("delegations", {"to": "mallory", **Delegation_window}).status_code == 201

    assert vote(api_as, mallory, approval).status_code == 404  # not yet: nothing to see
    over = api_as(finance.dana).post("delegations", {"to": "mallory", **window(-60, -5)})
    assert over.status_code == 400 and "future" in over.json()["detail"]


def test_delegating_to_oneself_or_without_powers_or_backwards_is_refused(alice, mallory, agent, finance, api_as):
    route(agent)  # dana may decide what it routes: she has something to hand over
    to_self = api_as(finance.dana).post("delegations", {"to": "dana", **window()})
    nobody = api_as(finance.dana).post("delegations", {"to": "zed", **window()})
    backwards = api_as(finance.dana).post("delegations", {"to": "mallory", **window(30, 10)})
    no_powers = api_as(mallory).post("delegations", {"to": "dana", **window()})

    assert to_self.status_code == 400 and "yourself" in to_self.json()["detail"]
    assert nobody.status_code == 400 and "zed" in nobody.json()["detail"]
    assert backwards.status_code == 400
    assert no_powers.status_code == 403
    assert Delegation.objects.count() == 0


def test_nobody_decides_their_own_call_through_a_delegation(agent, finance, api_as):
    route(agent)
    owner = member("owen")
    approval = routed_call(owner, agent)
    api_as(finance.dana).post("delegations", {"to": "owen", **window()})

    assert vote(api_as, owner, approval).status_code == 403
    assert Vote.objects.count() == 0


def test_a_delegate_of_a_global_approver_decides_an_unrouted_call_needing_an_approver_on_their_behalf(alice, bob, mallory, ops_agent, api_as):
    from approvals.services import request_approval

    conversation = start(alice, ops_agent, "hello")
    call = ToolCall.objects.create(
        message=conversation.messages.first(), position=9, call_id="c9", name="deploy", arguments={},
        status=ToolCall.Status.PENDING_APPROVAL,
    )
    approval = request_approval(
        tool_call_id=call.pk, conversation_id=conversation.pk, requested_by_id=alice.pk, reason="r", risk="high",
        arguments_hash="", approver_required=True,
    )
    assert api_as(bob).post("delegations", {"to": "mallory", **window()}).status_code == 201

    response = vote(api_as, mallory, approval, "reject", reason="not today")

    assert response.status_code == 200 and response.json()["decided_by"] == "mallory" and response.json()["on_behalf_of"] == "bob"


# --- reminders and escalation ---------------------------------------------------------------------


def test_reminder_and_escalation_happen_once_each_and_let_the_escalation_group_decide(alice, agent, finance, api_as):
    Webhook.objects.create(url="http://127.0.0.1:9/hook", secret="s")
    route(agent, quorum=1, remind_after_seconds=60, escalate_after_seconds=300, escalate_to=["oncall"])
    approval = routed_call(alice, agent)
    assert approval.remind_at is not None and approval.escalate_at is not None
    later = approval.requested_at + timedelta(seconds=61)

    assert escalation.send_due_reminders(now=later) == [approval.pk]
    assert escalation.send_due_reminders(now=later + timedelta(seconds=1)) == []  # once
    assert escalation.escalate_due(now=later) == []  # not yet
    assert vote(api_as, finance.olga, approval).status_code == 403

    much_later = approval.requested_at + timedelta(seconds=301)
    assert escalation.escalate_due(now=much_later) == [approval.pk]
    assert escalation.escalate_due(now=much_later) == []  # once
    events = list(WebhookDelivery.objects.filter(approval=approval).values_list("event", flat=True).order_by("pk"))
    assert events == ["approval.requested", "approval.reminder", "approval.escalated"]
    escalated = Approval.objects.get(pk=approval.pk)
    assert escalated.reminded_at is not None and escalated.escalated_at is not None

    response = vote(api_as, finance.olga, approval)
    assert response.status_code == 200 and response.json()["status"] == "approved" and response.json()["escalated_at"]


def test_a_decided_or_expired_approval_is_neither_reminded_nor_escalated(alice, agent, finance, api_as):
    route(agent, quorum=1, remind_after_seconds=60, escalate_after_seconds=120, escalate_to=["oncall"])
    decided, overdue = routed_call(alice, agent), routed_call(alice, agent)
    vote(api_as, finance.dana, decided)
    Approval.objects.filter(pk=overdue.pk).update(expires_at=overdue.requested_at + timedelta(seconds=30))
    later = overdue.requested_at + timedelta(seconds=200)

    assert escalation.send_due_reminders(now=later) == [] and escalation.escalate_due(now=later) == []


# --- the audit chain -----------------------------------------------------------------------------


def verify_audit() -> str:
    from io import StringIO

    out = StringIO()
    call_command("verify_audit", stdout=out)
    return out.getvalue()


def test_votes_and_delegations_are_links_of_the_one_audit_chain(alice, mallory, agent, finance, api_as):
    route(agent)
    approval = routed_call(alice, agent)
    made = api_as(finance.dana).post("delegations", {"to": "mallory", **window()}).json()
    vote(api_as, mallory, approval)
    vote(api_as, finance.erin, approval)
    api_as(finance.dana).delete(f"delegations/{made['id']}")

    verdict = audit.verify()

    # the policy versions (the agent, its route), the delegation, two votes, the decision, the delegation's end
    versions = list(PolicyVersion.objects.values_list("chain_position", flat=True))
    assert verdict.is_intact and verdict.decisions == 5 + len(versions)
    delegation = Delegation.objects.get()
    positions = sorted([delegation.chain_position, delegation.end_chain_position, approval_position(approval), *Vote.objects.values_list("chain_position", flat=True)])
    assert positions == list(range(len(versions) + 1, len(versions) + 6))


def approval_position(approval) -> int:
    return Approval.objects.get(pk=approval.pk).chain_position


@pytest.fixture
def without_triggers():
    """As someone who owns the tables would: the triggers dropped (they refuse what follows)."""
    from django.db import connection

    from approvals.audit import triggers

    for table, name in (("approvals_vote", "approvals_vote"), ("approvals_delegation", "approvals_delegation")):
        triggers.uninstall(connection, table=table, name=name)
    yield
    triggers.install_decided_is_final()


def test_a_vote_is_final_and_kept_and_so_is_an_ended_delegation(alice, mallory, agent, finance, api_as):
    from django.db import IntegrityError, transaction

    route(agent)
    approval = routed_call(alice, agent)
    made = api_as(finance.dana).post("delegations", {"to": "mallory", **window()}).json()
    vote(api_as, finance.dana, approval)
    api_as(finance.dana).delete(f"delegations/{made['id']}")

    for change in (
        lambda: Vote.objects.update(comment="rubber stamp"),
        lambda: Vote.objects.all().delete(),
        lambda: Delegation.objects.update(ends_at=timezone.now() + timedelta(days=9)),
        lambda: Delegation.objects.all().delete(),
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            change()
    assert audit.verify().is_intact


def test_a_changed_vote_or_a_removed_delegation_breaks_the_chain(alice, mallory, agent, finance, api_as, without_triggers):
    route(agent)
    approval = routed_call(alice, agent)
    made = api_as(finance.dana).post("delegations", {"to": "mallory", **window()}).json()
    vote(api_as, finance.dana, approval)
    assert "intact" in verify_audit()

    Vote.objects.update(comment="rubber stamp")
    verdict = audit.verify()
    assert not verdict.is_intact and "vote #" in verdict.what and "no longer matches" in verdict.why
    Vote.objects.update(comment="")
    assert audit.verify().is_intact

    removed = Delegation.objects.get(pk=made["id"]).chain_position  # after the policy versions, before the vote
    Delegation.objects.filter(pk=made["id"]).delete()
    verdict = audit.verify()
    assert not verdict.is_intact and f"link {removed} before it is missing" in verdict.why and "vote #" in verdict.what


def test_a_delegate_cannot_pass_on_what_was_delegated_to_them(alice, mallory, agent, finance, api_as):
    route(agent)
    api_as(finance.dana).post("delegations", {"to": "mallory", **window()})

    passed_on = api_as(mallory).post("delegations", {"to": "alice", **window()})

    assert passed_on.status_code == 403 and Delegation.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {"quorum": 0}, {"quorum": "two"}, {"min_risk": "extreme"}, {"approvers": []}, {"tool": ""},
        {"remind_after_seconds": -1}, {"escalate_after_seconds": 60}, {"approvers": ["fin\x00ance"]}, {"agent": "x\x00"},
    ],
)
def test_a_route_that_says_nothing_valid_is_refused_with_a_clear_error_and_nothing_is_saved(router_user, agent, api_as, body):
    Group.objects.create(name="finance")

    response = api_as(router_user).post("routes", {"agent": agent.slug, "approvers": ["finance"], **body})

    # 422 for what the schema refuses (as everywhere in the API, naming the field), 400 for the rest
    assert response.status_code in (400, 422) and response.json()["detail"]
    assert Route.objects.count() == 0


def test_a_delegation_window_that_is_not_a_date_or_has_no_time_zone_is_refused(finance, agent, api_as):
    route(agent)
    not_dates = api_as(finance.dana).post("delegations", {"to": "erin", "starts_at": "soon", "ends_at": "later"})
    naive = api_as(finance.dana).post("delegations", {"to": "erin", "starts_at": "2026-01-01T00:00:00", "ends_at": "2099-01-01T00:00:00"})

    assert not_dates.status_code == 422 and "starts_at" in str(not_dates.json()["detail"])
    assert naive.status_code == 400 and "time zone" in naive.json()["detail"]
    assert Delegation.objects.count() == 0


def test_a_routed_card_pushed_to_every_viewer_offers_approve_only_to_the_routes_people(alice, bob, agent, finance):
    from tests.conftest import client_for

    made = route(agent, escalate_after_seconds=600, escalate_to=["oncall"])
    approval = routed_call(alice, agent)
    page = f"/conversations/{approval.conversation_id}/"

    outsider, member_, on_call, owner = (client_for(u).get(page).content.decode() for u in (bob, finance.dana, finance.olga, alice))

    hide = ".needs-approver.for-anyone.routed{} .approve-only {{ display: none; }}"
    assert hide.format("") in outsider  # a global approver outside the route: every routed card waits for others
    assert hide.format(f":not(.route-{made.pk})") in member_
    assert hide.format(f":not(.route-{made.pk}.route-escalated)") in on_call  # the escalation group: once escalated
    assert "for-anyone.routed" not in owner  # the owner never approves: data-may-approve is false for them
    assert f"routed route-{made.pk}" in member_
