"""The approvers' inbox in Chromium at 1280 and 390 px, against the real stack: keyboard shortcuts
(j/k move, o open, a open then approve, r reject with a reason, x select, e edit, ? the list; none
while typing, never a bulk approve by one key, never an approve of a row not opened), a group of
alike calls that decides exactly the calls it lists once opened, the selection count, snoozing, the
most urgent first, decided rows taken out in place, and an inbox of 20 mixed calls cleared with the
keyboard only."""
import pytest
from playwright.sync_api import Locator, Page, expect

from approvals.models import Approval
from tests.conftest import wait_until
from tests.e2e.browser import browser, new_page, row, start, wait_for_pending  # noqa: F401  (fixtures)
from tests.e2e.browser import logged_in, open_dashboard, open_group_of

pytestmark = pytest.mark.e2e

SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
AXE = "/static/vendor/axe-core-4.14.1.min.js"  # vendored; loaded by the test, never by a page


@pytest.fixture(params=list(SIZES))
def size(request) -> dict:
    width, height = SIZES[request.param]
    return {"width": width, "height": height}


def focused(page: Page) -> Locator:
    return page.locator("#dashboard-rows .is-focused")


def status_of(approval: Approval) -> str:
    return Approval.objects.get(pk=approval.pk).status


def test_j_and_k_move_o_opens_x_selects_and_question_mark_lists_the_keys(new_page, alice, bob, agent, api_for, size):
    api = api_for(alice)
    [write] = wait_for_pending(start(api, "write hello to one.txt"), 1)
    [email] = wait_for_pending(start(api, "email bob@example.com about the plan"), 1)
    page = logged_in(new_page, bob, **size)
    open_dashboard(page)

    page.keyboard.press("j")
    expect(focused(page)).to_have_attribute("data-approval-id", str(write.pk))
    page.keyboard.press("j")
    expect(focused(page)).to_have_attribute("data-approval-id", str(email.pk))
    page.keyboard.press("k")
    expect(focused(page)).to_have_attribute("data-approval-id", str(write.pk))
    expect(page.locator(f"#approval-row-{write.pk}:focus")).to_have_count(1)  # the real focus, for screen readers too

    page.keyboard.press("o")
    expect(row(page, write).get_by_role("button", name="Approve", exact=True)).to_be_visible()
    page.keyboard.press("o")
    expect(row(page, write).get_by_role("button", name="Approve", exact=True)).to_be_hidden()

    page.keyboard.press("x")
    expect(page.get_by_label(f"Select write_file #{write.pk}", exact=True)).to_be_checked()
    expect(page.locator("#selection-count")).to_have_text("1 selected")

    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    expect(page.get_by_role("dialog")).to_contain_text("open the row; pressed again once its preview is on screen, approve it")
    expect(page.get_by_role("dialog")).to_contain_text("A choicethe first option is chosen and focused: arrow keys change it, Enter answers")
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()

    assert status_of(write) == status_of(email) == Approval.Status.PENDING  # moving, opening and selecting decide nothing


def test_a_opens_the_focused_row_then_approves_it_only_and_the_focus_moves_to_the_next(new_page, alice, bob, agent, api_for, size):
    api = api_for(alice)
    [first] = wait_for_pending(start(api, "write hello to one.txt"), 1)
    [second] = wait_for_pending(start(api, "write goodbye to two.txt"), 1)  # two fields differ: not alike
    page = logged_in(new_page, bob, **size)
    open_dashboard(page)
    refreshes = page.locator("html").get_attribute("data-dashboard-refreshes")
    for key in ("j", "j", "x", "k"):  # the second selected: a selection is no target for "a"
        page.keyboard.press(key)
    expect(focused(page)).to_have_attribute("data-approval-id", str(first.pk))
    page.keyboard.press("a")  # a row never opened: "a" opens it, its preview on screen, and decides nothing

    expect(row(page, first).locator(":scope > .row-open")).to_have_attribute("open", "")
    expect(row(page, first).locator(".preview")).to_be_in_viewport()
    assert status_of(first) == Approval.Status.PENDING
    page.keyboard.press("a")

    expect(row(page, first)).to_have_count(0)
    assert status_of(first) == Approval.Status.APPROVED
    assert Approval.objects.get(pk=first.pk).decided_via == Approval.Via.DASHBOARD
    assert status_of(second) == Approval.Status.PENDING
    expect(focused(page)).to_have_attribute("data-approval-id", str(second.pk))
    expect(page.locator(f"#approval-row-{second.pk}:focus")).to_have_count(1)
    # Taken out in place: the list was not re-read, so the second row's selection stands.
    expect(page.locator("#dashboard-count")).to_have_text("1 pending.")
    expect(page.locator("#nav-inbox")).to_have_text("Approvals (1) waiting")
    expect(page.get_by_label(f"Select write_file #{second.pk}", exact=True)).to_be_checked()
    assert page.locator("html").get_attribute("data-dashboard-refreshes") == refreshes


def test_r_rejects_with_a_reason_e_edits_and_keys_do_nothing_while_typing(new_page, alice, bob, agent, api_for, size):
    api = api_for(alice)
    [write] = wait_for_pending(start(api, "write hello to one.txt"), 1)
    [email] = wait_for_pending(start(api, "email bob@example.com about the plan"), 1)
    page = logged_in(new_page, bob, **size)
    open_dashboard(page)

    page.get_by_label("Search").click()
    page.keyboard.type("jaxo")  # typed into the field, not taken as keys
    expect(page.get_by_label("Search")).to_have_value("jaxo")
    expect(focused(page)).to_have_count(0)
    page.get_by_label("Search").fill("")
    expect(page.locator(".approval-row")).to_have_count(2)

    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("e")
    expect(row(page, email).locator(".edit-form, form[hx-post*='/edit/']").first).to_be_visible()
    assert status_of(email) == Approval.Status.PENDING

    page.keyboard.press("k")
    page.keyboard.press("r")
    reason = row(page, write).get_by_label("Reason for rejecting (optional)")
    expect(reason).to_be_focused()
    page.keyboard.type("not that file")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # Confirm reject
    expect(row(page, write)).to_have_count(0)
    stored = Approval.objects.get(pk=write.pk)
    assert stored.status == Approval.Status.REJECTED and stored.rejection_reason == "not that file"
    assert status_of(email) == Approval.Status.PENDING


def test_the_group_row_approves_exactly_the_calls_it_lists(new_page, alice, bob, agent, api_for, size):
    api = api_for(alice)
    listed = wait_for_pending(start(api, "delete notes/a.txt, notes/b.txt and notes/c.txt"), 3)
    [critical] = wait_for_pending(start(api, "delete all files"), 1)
    [other_folder] = wait_for_pending(start(api, "write hi to logs/d.txt"), 1)  # another tool
    page = logged_in(new_page, bob, **size)
    open_dashboard(page)

    group = page.locator(f"#approval-group-{listed[0].pk}")
    expect(group).to_contain_text("3 alike calls:")
    expect(group).to_contain_text("notes/a.txt, notes/b.txt, notes/c.txt")
    expect(group).to_have_attribute("data-approval-ids", " ".join(str(a.pk) for a in listed))
    expect(page.locator(".approval-group")).to_have_count(1)  # the critical call and the other tool stand alone
    expect(group.get_by_role("button", name="Approve these 3")).to_be_hidden()  # decided together only once opened

    page.keyboard.press("j")
    expect(focused(page)).to_have_attribute("data-approval-id", str(critical.pk))  # the most urgent first
    page.keyboard.press("j")
    expect(focused(page)).to_have_id(f"approval-group-{listed[0].pk}")
    page.keyboard.press("a")  # opens the group: every call it decides on screen
    expect(group.get_by_role("button", name="Approve these 3")).to_be_visible()
    expect(group.get_by_role("button", name="Approve these 3")).not_to_be_focused()
    page.keyboard.press("a")  # one key never approves a group: it only reaches its button
    expect(group.get_by_role("button", name="Approve these 3")).to_be_focused()
    assert all(status_of(a) == Approval.Status.PENDING for a in listed)
    page.keyboard.press("Enter")

    expect(page.locator("#bulk-outcome")).to_have_text("Approved 3.")
    expect(group).to_have_count(0)
    assert [status_of(a) for a in listed] == [Approval.Status.APPROVED] * 3
    assert status_of(critical) == status_of(other_folder) == Approval.Status.PENDING


def test_a_group_whose_call_changed_meanwhile_decides_nothing_and_shows_the_change(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    listed = wait_for_pending(start(api, "delete notes/a.txt and notes/b.txt"), 2)
    page = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(page)
    group = page.locator(f"#approval-group-{listed[0].pk}")
    expect(group).to_be_visible()
    group.locator(":scope > .row-open > summary").click()
    # An edit lands without a push reaching this page (written straight to the database).
    Approval.objects.filter(pk=listed[1].pk).update(edited_arguments={"path": "notes/z.txt"}, edited_arguments_hash="e" * 64)

    group.get_by_role("button", name="Approve these 2").click()

    expect(page.locator("#bulk-outcome")).to_contain_text("Nothing was decided")
    expect(page.locator("#bulk-outcome")).to_contain_text("1 was edited meanwhile")
    expect(page.locator(".approval-group")).to_contain_text("notes/z.txt")  # the list re-read shows the edit
    assert [status_of(a) for a in listed] == [Approval.Status.PENDING] * 2


def test_the_selection_count_sits_by_the_bulk_buttons_and_decides_only_the_selected(new_page, alice, bob, agent, api_for, size):
    api = api_for(alice)
    one, two, three = wait_for_pending(start(api, "delete one.txt, two.txt and three.txt"), 3)
    page = logged_in(new_page, bob, **size)
    open_dashboard(page)
    bar = page.locator("#bulk-form")
    open_group_of(row(page, one))  # three alike deletes: one group

    page.get_by_label(f"Select delete_file #{one.pk}", exact=True).check()
    page.get_by_label(f"Select delete_file #{three.pk}", exact=True).check()

    expect(bar.locator("#selection-count")).to_have_text("2 selected")
    expect(bar.get_by_role("button", name="Reject selected")).to_be_in_viewport()  # sticky, next to the rows
    bar.get_by_label("Reason (for rejecting the selected)").fill("not these")
    bar.get_by_role("button", name="Reject selected").click()
    expect(page.locator("#bulk-outcome")).to_have_text("Rejected 2.")
    expect(page.locator(".approval-row")).to_have_count(1)
    expect(bar.locator("#selection-count")).to_have_text("0 selected")
    assert [status_of(a) for a in (one, two, three)] == [Approval.Status.REJECTED, Approval.Status.PENDING, Approval.Status.REJECTED]


def test_a_snoozed_call_leaves_the_inbox_and_the_count_and_waits_under_snoozed(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    snoozed, kept = wait_for_pending(start(api, "delete one.txt and two.txt"), 2)
    page = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(page)
    expect(page.locator("#nav-inbox")).to_have_text("Approvals (2) waiting")
    open_group_of(row(page, snoozed))

    row(page, snoozed).get_by_label(f"More for delete_file #{snoozed.pk}").click()
    row(page, snoozed).get_by_role("button", name="Snooze for an hour").click()

    expect(row(page, snoozed)).to_have_count(0)
    expect(row(page, kept)).to_be_visible()
    expect(page.locator("#nav-inbox")).to_have_text("Approvals (1) waiting")
    page.get_by_role("link", name="Snoozed (1)").click()
    expect(row(page, snoozed)).to_be_visible()
    assert status_of(snoozed) == Approval.Status.PENDING


def test_an_inbox_of_20_mixed_calls_is_cleared_with_the_keyboard_only(new_page, alice, bob, agent, api_for):
    api = api_for(alice)
    phrases = [
        "delete notes/a.txt, notes/b.txt and notes/c.txt",  # alike deletes: with the three below, one group row
        "delete all files",  # critical: its typed confirmation
        "ask me to choose between tea, coffee and water",  # a question
        *(f"write draft {n} to draft{n}.txt" for n in range(7)),  # path and content differ: each its own row
        *(f"email person{n}@example.com about item {n}" for n in range(5)),
        "delete old1.txt and old2.txt",
        "delete logs/x.txt",
    ]
    for phrase in phrases:
        conversation_id = start(api, phrase)
        wait_for_pending(conversation_id, 3 if "notes/" in phrase else 2 if "old1" in phrase else 1)
    assert Approval.objects.filter(status=Approval.Status.PENDING).count() == 20
    critical = Approval.objects.get(tool_call__name="delete_all_files")
    page = logged_in(new_page, bob, width=1280, height=900)
    open_dashboard(page)
    expect(page.locator(".approval-group")).to_have_count(1)
    expect(page.locator("#dashboard-rows [data-line]").first).to_have_attribute("data-approval-id", str(critical.pk))  # the most urgent first
    keys = page.keyboard

    keys.press("j")
    for _ in range(30):
        line = focused(page)
        expect(line).to_have_count(1)
        line_id = line.get_attribute("id")
        kind = page.evaluate(
            """(id) => { const line = document.getElementById(id);
                 if (line.classList.contains('approval-group')) return 'group';
                 if (line.querySelector('.answer-form')) return 'question';
                 if (line.classList.contains('row-critical')) return 'critical';
                 return 'action'; }""",
            line_id,
        )
        keys.press("a")  # opens the row (a question: its first choice focused; a critical call: its confirmation)
        expect(page.locator(f"#{line_id} > .row-open")).to_have_attribute("open", "")
        if kind == "group":
            keys.press("a")  # to "Approve these 6"
            keys.press("Enter")
        elif kind == "critical":
            keys.type(critical.confirmation_hint)
            keys.press("Enter")
        elif kind == "question":
            keys.press("Enter")  # the first choice, focused
        else:
            expect(page.locator(f"#{line_id} .preview")).to_be_in_viewport()
            keys.press("a")
        expect(page.locator(f"#{line_id}")).to_have_count(0)
        if not Approval.objects.filter(status=Approval.Status.PENDING).exists():
            break
        wait_until(lambda: page.locator("#dashboard-rows .is-focused").count() == 1, message="the next row focused")

    assert not Approval.objects.filter(status=Approval.Status.PENDING).exists()
    assert set(Approval.objects.values_list("status", flat=True)) == {Approval.Status.APPROVED, Approval.Status.ANSWERED}
    assert Approval.objects.get(kind=Approval.Kind.QUESTION).answer == "tea"  # the first choice, by Enter
    expect(page.locator(".approval-row")).to_have_count(0)
    expect(page.locator("#nav-inbox")).to_have_text("Approvals")


def serious_violations(page: Page) -> list[str]:
    page.add_script_tag(url=AXE)
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']}: {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in results["violations"] if v["impact"] in ("serious", "critical")
    ]


def test_the_inbox_with_a_group_a_card_and_a_menu_open_has_no_serious_axe_violations(new_page, alice, bob, agent, api_for, size):
    api = api_for(alice)
    listed = wait_for_pending(start(api, "delete notes/a.txt and notes/b.txt"), 2)
    [critical] = wait_for_pending(start(api, "delete all files"), 1)
    wait_for_pending(start(api, "ask me to choose between tea, coffee and water"), 1)
    page = logged_in(new_page, bob, **size)
    open_dashboard(page)

    page.locator(f"#approval-group-{listed[0].pk} > .row-open > summary").click()
    row(page, critical).locator(":scope > .row-open > summary").click()
    row(page, critical).get_by_label(f"More for delete_all_files #{critical.pk}").click()
    page.get_by_label(f"Select delete_all_files #{critical.pk}", exact=True).check()
    expect(page.locator("#selection-count")).to_have_text("1 selected")

    assert serious_violations(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    assert "{#" not in page.content() and "#}" not in page.content()
