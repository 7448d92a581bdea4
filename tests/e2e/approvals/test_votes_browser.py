"""Votes in Chromium against the real stack (issue 25, items 1-2): a quorum-2 route to finance;
dana approves from her inbox and is told her vote counts, the owner's card and erin's inbox show
"1 of 2 approvals: dana" without reloading, erin approves from the card and the email goes once.
A route member without the global permission sees the routed call in their inbox and nothing else.
The gated call is an email: `OutboxEmail` counts how often it ran."""
import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from approvals.models import Approval
from approvals.deciders.routemaking import create_route
from chat.models import OutboxEmail, ToolCall
from tests.conftest import wait_until
from tests.e2e.browser import browser, button, log_in, new_page, open_conversation, start, wait_for_pending  # noqa: F401  (fixtures)
from tests.e2e.browser import logged_in, open_dashboard, opened, still_same_document

pytestmark = pytest.mark.e2e

EMAIL = "email carol@example.com about lunch"


def finance_member(name: str) -> User:
    """A member of finance (no global approver permission), with the password log_in types."""
    user = User.objects.create_user(name, password=f"{name}-password")
    user.groups.add(Group.objects.get_or_create(name="finance")[0])
    return User.objects.get(pk=user.pk)


def finance_route(quorum: int = 2):
    return create_route(created_by=None, agent="demo", tool="send_email", approvers=["finance"], quorum=quorum)


def test_a_vote_is_seen_live_on_the_owners_card_and_the_others_inbox_and_the_second_approves_once(new_page, alice, agent, api_for):
    dana, erin = finance_member("dana"), finance_member("erin")
    finance_route()
    conversation_id = start(api_for(alice), EMAIL)
    [approval] = wait_for_pending(conversation_id, 1)
    assert approval.route_id is not None and approval.quorum == 2

    owners = new_page(width=1280, height=900)
    log_in(owners, alice)
    open_conversation(owners, conversation_id)
    owners_card = owners.locator(f"#approval-{approval.pk}")
    expect(owners_card).to_contain_text("Needs 2 approvals from finance (alice may still reject it).")
    expect(button(owners_card, "Approve")).to_have_count(0)
    expect(button(owners_card, "Reject")).to_be_visible()  # the owner's veto
    danas = logged_in(new_page, dana, width=1280, height=900)
    open_dashboard(danas)
    erins = logged_in(new_page, erin, width=390, height=844)
    open_dashboard(erins)

    danas_row = opened(danas.locator(f"#approval-row-{approval.pk}"))
    button(danas_row, "Approve").click()

    expect(danas_row.locator(".voted")).to_have_text("You approved · 1 of 2")
    expect(button(danas_row, "Approve")).to_have_count(0)
    expect(owners.locator(f"#votes-{approval.pk}")).to_have_text("1 of 2 approvals: dana")
    erins_row = erins.locator(f"#approval-row-{approval.pk}")
    expect(erins_row.locator(".votes-pill")).to_have_text("1 of 2 approvals: dana")
    expect(erins_row.locator(".votes-pill")).to_be_visible()  # on the closed row, at 390 px
    stored = Approval.objects.get(pk=approval.pk)
    assert stored.status == Approval.Status.PENDING and [vote.user for vote in stored.votes.all()] == [dana]
    assert OutboxEmail.objects.count() == 0

    erins_card = new_page(width=1280, height=900)
    log_in(erins_card, erin)
    open_conversation(erins_card, conversation_id)
    expect(erins_card.locator(f"#votes-{approval.pk}")).to_have_text("1 of 2 approvals: dana")
    button(erins_card.locator(f"#approval-{approval.pk}"), "Approve").click()

    expect(owners_card).to_contain_text("Approved by erin via chat")
    expect(owners_card.locator(".decided-votes")).to_have_text("2 of 2 approvals: dana, erin")
    expect(erins_row).to_have_count(0)  # decided: off the inbox
    wait_until(lambda: ToolCall.objects.filter(pk=approval.tool_call_id, status=ToolCall.Status.SUCCEEDED).exists(), timeout=20, message="the email to run")
    assert OutboxEmail.objects.count() == 1  # the email went once
    stored = Approval.objects.get(pk=approval.pk)
    assert stored.status == Approval.Status.APPROVED and stored.decided_by == erin and stored.votes.count() == 2
    assert still_same_document(erins) and still_same_document(danas)


def test_a_route_member_sees_the_routed_call_in_their_inbox_and_nothing_else(new_page, alice, agent, api_for):
    dana = finance_member("dana")
    finance_member("erin")
    finance_route(quorum=1)
    unrouted = start(api_for(alice), "delete a.txt")
    [other] = wait_for_pending(unrouted, 1)
    routed = start(api_for(alice), EMAIL)
    [mine] = wait_for_pending(routed, 1)

    danas = logged_in(new_page, dana, width=390, height=844)
    open_dashboard(danas)

    expect(danas.locator("#dashboard-count")).to_have_text("1 pending.")
    expect(danas.locator(f"#approval-row-{mine.pk}")).to_be_visible()
    expect(danas.locator(f"#approval-row-{other.pk}")).to_have_count(0)
    expect(danas.locator("#nav-inbox")).to_have_text(re.compile(r"Approvals \(1\)"))
    danas.goto(f"/conversations/{unrouted}/")
    expect(danas.locator("h1")).to_contain_text(re.compile("not found", re.I))
    danas.goto(f"/conversations/{routed}/")
    expect(button(danas.locator(f"#approval-{mine.pk}"), "Approve")).to_be_visible()


def test_the_delegations_page_delegates_shows_an_error_in_the_form_and_ends_one_accessibly(new_page, bob, carol):
    from approvals.models import Delegation
    from tests.e2e.approvals.test_a11y_browser import assert_accessible

    for width, height in ((1280, 900), (390, 844)):
        page = new_page(width=width, height=height)
        log_in(page, bob)
        page.get_by_role("link", name="Delegations").click()
        page.get_by_role("textbox", name="To").fill("bob")
        button(page, "Delegate").click()
        expect(page.get_by_role("alert")).to_have_text("You cannot delegate to yourself.")
        assert_accessible(page, f"the delegations page with an error at {width} px")
        assert not Delegation.objects.exists()

    page.get_by_role("textbox", name="To").fill("carol")
    button(page, "Delegate").click()
    expect(page.locator(".badge-delegation-active")).to_have_text("active")
    delegation = Delegation.objects.get()
    assert (delegation.delegator, delegation.delegate, delegation.ended_at) == (bob, carol, None)
    assert_accessible(page, "the delegations page with a delegation at 390 px")

    page.get_by_role("button", name="End now: the delegation to carol").click()

    expect(page.locator(f"#delegation-{delegation.pk}")).to_contain_text("ended early")
    delegation.refresh_from_db()
    assert delegation.ended_by == bob


def test_a_routed_card_pushed_live_offers_approve_to_the_routes_member_and_not_to_a_global_approver_outside_it(new_page, alice, bob, agent, api_for):
    from tests.e2e.browser import say, wait_for_status
    from chat.models import Conversation

    dana = finance_member("dana")
    finance_route()
    # A first routed call, vetoed by its owner: from then on dana may open the conversation.
    conversation_id = start(api_for(alice), EMAIL)
    [first] = wait_for_pending(conversation_id, 1)
    vetoed = api_for(alice).post(f"approvals/{first.pk}/decision", {"decision": "reject", "reason": "not yet"})
    assert vetoed.status_code == 200, vetoed.text
    wait_for_status(conversation_id, Conversation.Status.IDLE)
    bobs = logged_in(new_page, bob, width=1280, height=900)  # a global approver, not in finance
    open_conversation(bobs, conversation_id)
    danas = logged_in(new_page, dana, width=390, height=844)
    open_conversation(danas, conversation_id)

    say(api_for(alice), conversation_id, "email dave@example.com about lunch")  # pushed, rendered once for every viewer
    [approval] = wait_for_pending(conversation_id, 1)

    bobs_card, danas_card = (page.locator(f"#approval-{approval.pk}") for page in (bobs, danas))
    expect(bobs_card.locator(".waiting")).to_contain_text("Waiting for finance")
    expect(button(bobs_card, "Approve")).to_be_hidden()
    expect(button(danas_card, "Approve")).to_be_visible()
    expect(danas_card.locator(".waiting")).to_be_hidden()
