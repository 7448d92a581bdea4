"""The approval dashboard and its history in Chromium, against the real stack: approvers decide
other people's calls there, one at a time or in bulk, while the requester's chat page follows live."""
import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Locator, Page, expect

from approvals.models import Approval
from chat.models import Conversation
from tests.e2e.approvals.conftest import start_on
from tests.e2e.browser import (  # noqa: F401  (browser and new_page are fixtures)
    OPEN_SOCKET,
    browser,
    button,
    card,
    conversation_id_of,
    decide,
    last_reply,
    log_in,
    logged_in,
    new_page,
    open_conversation,
    open_dashboard,
    open_group_of,
    opened,
    row,
    start,
    status_bar,
    still_same_document,
    wait_for_live,
    wait_for_pending,
    wait_for_status,
)

pytestmark = pytest.mark.e2e

TITLE = "Approvals · hitl"
DECISION_BUTTONS = re.compile(r"^(Approve|Reject)$")

def pending_count(page: Page) -> Locator:
    return page.locator("#dashboard-count")


def stored(approval: Approval) -> Approval:
    return Approval.objects.select_related("decided_by", "tool_call").get(pk=approval.pk)


def cells(page: Page, approval: Approval) -> Locator:
    return page.locator(f"#history-{approval.pk} td")


def test_an_approver_approves_from_the_dashboard_and_the_owners_chat_follows_live(e2e, new_page, alice, bob, agent, api_for):
    conversation_id = start(api_for(alice), "write one to a.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    alices = logged_in(new_page, alice)
    open_conversation(alices, conversation_id)
    alices.evaluate("window.sameDocument = true")
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)

    listed = row(bobs, approval)
    expect(listed).to_contain_text("write_file")
    expect(listed).to_contain_text("medium risk")
    expect(listed).to_contain_text("Demo agent · requested by alice")
    expect(listed.get_by_label("Arguments")).to_contain_text('"path": "a.txt"')
    listed.get_by_label(f"More for write_file #{approval.pk}").click()  # the row's menu
    expect(listed.get_by_role("link", name="Open in conversation")).to_have_attribute(
        "href", f"/conversations/{conversation_id}/#tool-call-{approval.tool_call_id}"
    )
    listed.get_by_label(f"More for write_file #{approval.pk}").click()
    expect(listed.get_by_label(f"Select write_file #{approval.pk}", exact=True)).to_be_enabled()
    expect(pending_count(bobs)).to_have_text("1 pending.")
    button(opened(listed), "Approve").click()

    seen_by_alice = card(alices, "write_file", "a.txt")
    expect(seen_by_alice).not_to_have_attribute("data-status", "pending_approval")
    expect(seen_by_alice).to_have_attribute("data-status", "succeeded")
    expect(seen_by_alice).to_contain_text("Approved by bob via dashboard")
    expect(seen_by_alice.get_by_role("button", name=DECISION_BUTTONS)).to_have_count(0)
    expect(status_bar(alices)).to_have_attribute("data-status", "idle")
    expect(last_reply(alices)).to_contain_text("I did write a.txt: Wrote 3 bytes to a.txt.")
    assert still_same_document(alices)
    expect(listed).to_have_count(0)  # the decision's signal re-read the list
    expect(pending_count(bobs)).to_have_attribute("data-count", "0")
    expect(bobs.get_by_text("Nothing is waiting for a decision.")).to_be_visible()
    assert still_same_document(bobs)

    decided = stored(approval)
    assert (decided.status, decided.decided_by, decided.decided_via) == ("approved", bob, "dashboard")
    assert decided.tool_call.status == "succeeded"
    assert (e2e.sandbox_root / conversation_id / "a.txt").read_text() == "one"


def test_a_reason_typed_on_a_dashboard_row_is_stored_and_quoted_by_the_agent(new_page, alice, bob, agent, api_for):
    conversation_id = start(api_for(alice), "delete a.txt")
    [approval] = wait_for_pending(conversation_id, 1)
    reason = 'Not before the "Q3 <review>" & the audit'
    alices = logged_in(new_page, alice)
    open_conversation(alices, conversation_id)
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)

    listed = opened(row(bobs, approval))
    button(listed, "Reject").click()
    reason_box = listed.get_by_label("Reason for rejecting (optional)")
    expect(reason_box).to_be_focused()
    bobs.keyboard.type(reason)
    button(listed, "Confirm reject").click()

    seen_by_alice = card(alices, "delete_file", "a.txt")
    expect(seen_by_alice).to_have_attribute("data-status", "rejected")
    expect(seen_by_alice).to_contain_text("Rejected by bob via dashboard")
    expect(seen_by_alice).to_contain_text(f"“{reason}”")
    expect(seen_by_alice.get_by_role("button", name=DECISION_BUTTONS)).to_have_count(0)
    expect(last_reply(alices)).to_have_text(f"I did not delete a.txt (Rejected by bob: {reason}).")
    expect(status_bar(alices)).to_have_attribute("data-status", "idle")
    expect(listed).to_have_count(0)
    rejected = stored(approval)
    assert (rejected.status, rejected.decided_by, rejected.decided_via) == ("rejected", bob, "dashboard")
    assert rejected.rejection_reason == reason
    assert rejected.tool_call.status == "rejected"


def test_the_dashboard_lists_new_approvals_and_drops_decided_ones_without_reloading(new_page, alice, bob, agent, api_for):
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    expect(pending_count(bobs)).to_have_text("0 pending.")
    expect(bobs).to_have_title(TITLE)
    api = api_for(alice)

    first_id = start(api, "delete a.txt")
    [first] = wait_for_pending(first_id, 1)
    expect(row(bobs, first)).to_be_visible()
    expect(pending_count(bobs)).to_have_text("1 pending.")
    expect(bobs).to_have_title(f"(1) {TITLE}")
    second_id = start(api, "email carol@example.com about lunch")
    [second] = wait_for_pending(second_id, 1)
    expect(row(bobs, second)).to_contain_text("send_email")
    expect(bobs).to_have_title(f"(2) {TITLE}")
    expect(bobs.locator(".approval-row")).to_have_count(2)
    assert bobs.locator(".approval-row").evaluate_all("rows => rows.map(r => r.id)") == [
        f"approval-row-{first.pk}", f"approval-row-{second.pk}"  # oldest first
    ]

    decide(api, first, "reject", "changed my mind")  # elsewhere: the owner, through the API
    expect(row(bobs, first)).to_have_count(0)
    expect(row(bobs, second)).to_be_visible()
    expect(pending_count(bobs)).to_have_text("1 pending.")
    expect(bobs).to_have_title(f"(1) {TITLE}")
    assert still_same_document(bobs)
    assert stored(first).status == "rejected" and stored(second).status == "pending"


def test_bulk_reject_decides_exactly_the_selected_rows_with_the_reason(new_page, alice, bob, agent, api_for):
    conversation_id = start(api_for(alice), "delete a.txt, b.txt and c.txt")
    delete_a, delete_b, delete_c = wait_for_pending(conversation_id, 3)
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    expect(bobs.locator(".approval-row")).to_have_count(3)
    open_group_of(row(bobs, delete_a))  # three alike deletes: one group, its calls shown once opened

    bobs.get_by_label(f"Select delete_file #{delete_a.pk}", exact=True).check()
    bobs.get_by_label(f"Select delete_file #{delete_c.pk}", exact=True).check()
    bobs.get_by_label("Reason (for rejecting the selected)").fill("not during the freeze")
    button(bobs, "Reject selected").click()

    expect(bobs.locator("#bulk-outcome")).to_have_text("Rejected 2.")
    expect(row(bobs, delete_a)).to_have_count(0)
    expect(row(bobs, delete_c)).to_have_count(0)
    expect(bobs.locator(".approval-row")).to_have_count(1)
    expect(row(bobs, delete_b)).to_be_visible()
    expect(bobs.get_by_label(f"Select delete_file #{delete_b.pk}", exact=True)).not_to_be_checked()
    expect(pending_count(bobs)).to_have_text("1 pending.")
    assert still_same_document(bobs)
    for approval in (delete_a, delete_c):
        rejected = stored(approval)
        assert (rejected.status, rejected.decided_by, rejected.decided_via, rejected.rejection_reason) == (
            "rejected", bob, "dashboard", "not during the freeze"
        )
    untouched = stored(delete_b)
    assert (untouched.status, untouched.decided_by, untouched.rejection_reason) == ("pending", None, "")
    assert Conversation.objects.get(pk=conversation_id).status == "waiting_for_approval"


def test_a_four_eyes_call_waits_for_an_approver_who_decides_it_from_the_dashboard(new_page, alice, bob, ops_agent):
    alices = logged_in(new_page, alice)
    alices.get_by_label("Agent", exact=True).select_option(label="Ops agent (four eyes)")
    alices.get_by_label("Message", exact=True).fill("delete a.txt")
    button(alices, "Start").click()
    wait_for_live(alices)
    conversation_id = conversation_id_of(alices)
    [approval] = wait_for_pending(conversation_id, 1)

    pushed = card(alices, "delete_file", "a.txt")  # arrived through the socket, for any viewer
    expect(pushed).to_have_attribute("data-status", "pending_approval")
    expect(pushed.get_by_text("Waiting for an approver.")).to_be_visible()
    expect(pushed).to_contain_text("an approver other than alice must approve this high-risk call")
    expect(pushed.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(pushed.get_by_role("button", name="Reject", exact=True)).to_be_visible()  # the owner may always say no
    alices.reload()
    wait_for_live(alices)
    alices.evaluate("window.sameDocument = true")
    rendered = card(alices, "delete_file", "a.txt")  # rendered for alice herself
    expect(rendered).to_have_attribute("data-status", "pending_approval")
    expect(rendered.get_by_text("Waiting for an approver.")).to_be_visible()
    expect(rendered.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(rendered.get_by_role("button", name="Reject", exact=True)).to_be_visible()
    assert (stored(approval).approver_required, stored(approval).risk) == (True, "high")

    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    listed = row(bobs, approval)
    expect(listed).to_contain_text("Ops agent (four eyes) · requested by alice")
    expect(listed.get_by_label(f"Select delete_file #{approval.pk}", exact=True)).to_be_enabled()
    expect(listed.get_by_text("Waiting for an approver.")).to_have_count(0)
    button(opened(listed), "Approve").click()

    expect(rendered).to_have_attribute("data-status", "failed")  # it ran: there is no a.txt to delete
    expect(rendered).to_contain_text("No file named 'a.txt'")
    expect(rendered).to_contain_text("Approved by bob via dashboard")
    expect(rendered.get_by_text("Waiting for an approver.")).to_have_count(0)
    expect(status_bar(alices)).to_have_attribute("data-status", "idle")
    assert still_same_document(alices)
    decided = stored(approval)
    assert (decided.status, decided.decided_by, decided.decided_via) == ("approved", bob, "dashboard")
    assert decided.tool_call.status == "failed"


def test_an_approver_may_not_decide_their_own_four_eyes_call_and_another_approver_may(new_page, bob, carol, ops_agent, api_for):
    conversation_id = start_on(api_for(bob), "ops", "email x@example.com about the outage")
    [approval] = wait_for_pending(conversation_id, 1)
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)

    own = opened(row(bobs, approval))
    expect(own.get_by_label(f"Select send_email #{approval.pk}", exact=True)).to_be_disabled()
    expect(own.get_by_text("Waiting for an approver.")).to_be_visible()
    expect(own.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(own.get_by_role("button", name="Reject", exact=True)).to_be_visible()  # saying no needs no second pair of eyes
    carols = logged_in(new_page, carol)  # an approver through the Approvers group
    open_conversation(carols, conversation_id)  # bob's chat page, seen by another approver
    seen_by_carol = card(carols, "send_email")
    expect(seen_by_carol.get_by_text("Waiting for an approver.")).to_have_count(0)
    button(seen_by_carol, "Approve").click()

    expect(seen_by_carol).to_have_attribute("data-status", "succeeded")
    expect(seen_by_carol).to_contain_text("Approved by carol via chat")
    expect(own).to_have_count(0)  # bob's dashboard heard of it
    expect(bobs).to_have_title(TITLE)
    assert still_same_document(bobs)
    decided = stored(approval)
    assert (decided.status, decided.decided_by, decided.decided_via) == ("approved", carol, "chat")


def test_a_filter_narrows_the_list_in_place_and_the_url_keeps_it(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    delete_id, write_id = start(api, "delete a.txt"), start(api, "write hi to notes.txt")
    [delete_a] = wait_for_pending(delete_id, 1)
    [write_notes] = wait_for_pending(write_id, 1)
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    expect(bobs.locator(".approval-row")).to_have_count(2)

    bobs.locator(".filters-fold > summary").click()  # the filters are folded but for the search
    bobs.get_by_label("Risk").select_option("medium")
    expect(row(bobs, delete_a)).to_have_count(0)
    expect(row(bobs, write_notes)).to_be_visible()
    expect(pending_count(bobs)).to_have_text("1 pending.")
    expect(bobs).to_have_url(re.compile(r"/approvals/\?.*\brisk=medium\b"))
    assert still_same_document(bobs)

    later_write_id, later_delete_id = start(api, "write bye to later.txt"), start(api, "delete later.txt")
    [later_write] = wait_for_pending(later_write_id, 1)
    [later_delete] = wait_for_pending(later_delete_id, 1)
    expect(row(bobs, later_write)).to_be_visible()  # a signal's re-read keeps the filter
    expect(bobs.locator(".approval-row")).to_have_count(2)
    expect(row(bobs, later_delete)).to_have_count(0)
    expect(bobs).to_have_url(re.compile(r"\brisk=medium\b"))

    bobs.reload()
    expect(bobs.get_by_label("Risk")).to_have_value("medium")
    expect(bobs.locator(".approval-row")).to_have_count(2)
    expect(row(bobs, delete_a)).to_have_count(0)
    bobs.get_by_label("Search").fill("later")  # typed: the list follows after a short pause
    expect(bobs.locator(".approval-row")).to_have_count(1)
    expect(row(bobs, later_write)).to_be_visible()
    expect(bobs).to_have_url(re.compile(r"\bq=later\b.*\brisk=medium\b"))
    assert Approval.objects.filter(status="pending").count() == 4


def test_the_history_shows_who_decided_each_call_how_and_why(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    conversation_id = start(api, "delete a.txt, b.txt and c.txt")
    delete_a, delete_b, delete_c = wait_for_pending(conversation_id, 3)
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    button(opened(row(bobs, delete_a)), "Approve").click()
    expect(row(bobs, delete_a)).to_have_count(0)
    button(opened(row(bobs, delete_b)), "Reject").click()
    bobs.keyboard.type("keep b.txt")
    button(row(bobs, delete_b), "Confirm reject").click()
    expect(row(bobs, delete_b)).to_have_count(0)
    decide(api, delete_c, "reject", "c.txt stays too")
    expect(row(bobs, delete_c)).to_have_count(0)
    wait_for_status(conversation_id, "idle")

    bobs.get_by_role("link", name="History").click()

    expect(bobs.get_by_role("heading", name="Decided approvals")).to_be_visible()
    rows = bobs.locator("table.history tbody tr")
    expect(rows).to_have_count(3)
    assert rows.evaluate_all("rows => rows.map(r => r.id)") == [
        f"history-{delete_c.pk}", f"history-{delete_b.pk}", f"history-{delete_a.pk}"  # newest first
    ]
    # Decided, Outcome, Call (in words, then the tool), Risk, Agent, Requested (and by whom), By, Via,
    # Reason and comment, Edited; last a phone's Details (hidden here). Times to the second with the zone.
    when, requested_by_alice = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"), re.compile(r"^\S+ \d\d:\d\d:\d\d UTC by alice$")
    expect(cells(bobs, delete_a)).to_have_text([when, "Approved", "Delete a.txt delete_file", "high", "demo", requested_by_alice, "bob", "dashboard", re.compile(r"^\s*Why\?"), "", "Details"])  # the reason cell also folds the Why?
    expect(cells(bobs, delete_b)).to_have_text([when, "Rejected", "Delete b.txt delete_file", "high", "demo", requested_by_alice, "bob", "dashboard", re.compile(r"^keep b\.txt\s*Why\?"), "", "Details"])
    expect(cells(bobs, delete_c)).to_have_text([when, "Rejected", "Delete c.txt delete_file", "high", "demo", requested_by_alice, "alice", "api", re.compile(r"^c\.txt stays too\s*Why\?"), "", "Details"])
    expect(bobs.get_by_text("Page 1 of 1 (3 decisions)")).to_be_visible()

    bobs.get_by_label("Search").fill("stays")
    bobs.get_by_label("Search").press("Enter")
    expect(rows).to_have_count(1)
    expect(bobs.locator(f"#history-{delete_c.pk}")).to_be_visible()
    assert [(a.status, a.decided_by.username, a.decided_via) for a in map(stored, (delete_a, delete_b, delete_c))] == [
        ("approved", "bob", "dashboard"), ("rejected", "bob", "dashboard"), ("rejected", "alice", "api")
    ]


def test_a_non_approver_gets_a_403_page_and_a_refused_socket(new_page, alice, bob, agent, api_for):
    conversation_id = start(api_for(alice), "delete secret-plans.txt")
    wait_for_pending(conversation_id, 1)
    alices = logged_in(new_page, alice)
    expect(alices.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals")).to_have_count(0)

    refused = alices.goto("/approvals/")

    assert refused.status == 403
    expect(alices.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(alices.get_by_text("The dashboard is for approvers.")).to_be_visible()
    expect(alices.locator("#dashboard-count")).to_have_count(0)
    expect(alices.get_by_text("secret-plans.txt")).to_have_count(0)
    assert alices.goto("/approvals/history/").status == 403
    socket = alices.evaluate(OPEN_SOCKET, "/ws/approvals/")
    assert socket["opened"] is False and socket["code"] != 1000, socket
    bobs = logged_in(new_page, bob)
    assert bobs.evaluate(OPEN_SOCKET, "/ws/approvals/") == {"opened": True, "code": 1000}  # the same socket, an approver
    assert Approval.objects.get(conversation_id=conversation_id).status == "pending"


def test_the_dashboard_fits_a_375px_wide_screen_with_rows(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    delete_id = start(api, "delete a-rather-long-name-for-a-file-on-a-phone-screen-that-goes-on.txt and b.txt")
    email_id = start(api, "email someone.with.a.long.address@example.com about the quarterly numbers")
    long_name, _ = wait_for_pending(delete_id, 2)
    wait_for_pending(email_id, 1)
    phone = logged_in(new_page, bob, width=375, height=812)
    open_dashboard(phone)
    expect(phone.locator(".approval-row")).to_have_count(3)
    expect(pending_count(phone)).to_have_text("3 pending.")

    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    button(opened(row(phone, long_name)), "Reject").click()  # the reason form opens too
    expect(row(phone, long_name).get_by_label("Reason for rejecting (optional)")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    decide(api, long_name)  # a decision elsewhere re-reads the list
    expect(phone.locator(".approval-row")).to_have_count(2)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    phone.goto("/approvals/history/")
    expect(phone.locator("table.history tbody tr")).to_have_count(1)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    assert Approval.objects.filter(status="pending").count() == 2


def test_each_pushed_signal_re_reads_the_list_once(new_page, alice, bob, agent, api_for):
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    expect(bobs.locator("html")).to_have_attribute("data-dashboard-refresh-triggers", "1")  # the socket's open

    conversation_id = start(api_for(alice), "delete a.txt")
    wait_for_pending(conversation_id, 1)
    expect(bobs.locator(".approval-row")).to_have_count(1)

    # Triggered synchronously while the pushed frame was handled, so all in before the row showed.
    assert bobs.locator("html").get_attribute("data-dashboard-refresh-triggers") == "2"


def test_back_leaves_the_dashboard_however_often_it_refreshed(new_page, alice, bob, agent, api_for):
    bobs = logged_in(new_page, bob)  # lands on the conversation list
    open_dashboard(bobs)
    conversation_id = start(api_for(alice), "delete a.txt")
    wait_for_pending(conversation_id, 1)
    expect(bobs.locator(".approval-row")).to_have_count(1)

    bobs.go_back()

    assert urlsplit(bobs.url).path == "/", bobs.url


def test_approve_all_through_the_api_empties_an_open_dashboard(new_page, alice, bob, agent, api_for):
    """A signal per decision, each a re-read of the list. A re-read asked for while one is in flight
    is queued, never dropped (htmx's default), so the list ends current however the signals bunch up."""
    bobs = logged_in(new_page, bob)
    open_dashboard(bobs)
    api = api_for(alice)
    conversation_ids = [start(api, f"delete f{i}.txt") for i in range(12)]
    approvals = [approval for conversation_id in conversation_ids for approval in wait_for_pending(conversation_id, 1)]
    expect(bobs.locator(".approval-row")).to_have_count(12)

    response = api_for(bob).post("approvals/decisions", {"ids": [a.pk for a in approvals], "decision": "approve"})

    assert response.status_code == 200, response.text
    assert len(response.json()["decided"]) == 12
    expect(bobs.locator(".approval-row")).to_have_count(0)
    expect(pending_count(bobs)).to_have_text("0 pending.")
    for conversation_id in conversation_ids:
        wait_for_status(conversation_id, Conversation.Status.IDLE)
    expect(bobs.locator(".approval-row")).to_have_count(0)
    assert still_same_document(bobs)
