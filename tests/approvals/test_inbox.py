"""The approvers' inbox (issue 23, item 3): alike calls grouped and decided exactly as listed, the
user's request beside each call, snoozes per approver, the nav's count, the filters kept."""
import re
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import inbox
from approvals.models import Approval, Snooze
from approvals.selectors import Filters
from tests.conftest import client_for, pending_approvals, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}


def page_of(user, url: str = "/approvals/", **headers) -> str:
    response = client_for(user).get(url, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def group_ids(page: str) -> list[list[int]]:
    return [[int(i) for i in ids.split()] for ids in re.findall(r'data-approval-ids="([0-9 ]+)"', page)]


def posted_versions(page: str, first_id: int) -> list[str]:
    group = page[page.index(f'id="approval-group-{first_id}"'):]
    start = group.index('class="group-form"')
    form = group[start:group.index("</form>", start)]
    return re.findall(r'name="approval_ids" value="([^"]+)"', form)


def test_alike_calls_are_one_group_that_lists_each_id_and_version(alice, bob, agent):
    deletes = pending_approvals(start(alice, agent, "delete notes/a.txt, notes/b.txt and notes/c.txt"))
    elsewhere = pending_approvals(start(alice, agent, "write hi to notes/d.txt"))  # another tool

    page = page_of(bob)

    assert group_ids(page) == [[a.pk for a in deletes]]
    assert posted_versions(page, deletes[0].pk) == [f"{a.pk}:{a.shown_hash}" for a in deletes]
    assert "3 alike calls:" in page and "notes/a.txt, notes/b.txt, notes/c.txt" in page
    assert f'id="approval-row-{elsewhere[0].pk}"' in page
    assert all(f'data-approval-id="{a.pk}"' in page for a in deletes + elsewhere)  # each row keeps its id


def test_a_group_row_says_when_its_first_call_expires(alice, bob, agent):
    a, b = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    soon = timezone.now() + timedelta(minutes=7)
    Approval.objects.filter(pk=b.pk).update(expires_at=soon)
    Approval.objects.filter(pk=a.pk).update(expires_at=soon + timedelta(hours=1))

    page = page_of(bob)
    summary = page[page.index(f'id="approval-group-'):]
    summary = summary[:summary.index("</summary>")]

    assert 'class="row-expiry" data-expires-at="' in summary  # app.js counts down beside it
    assert "the first expires <time" in summary and soon.strftime("%H:%M") + " UTC" in summary


def test_calls_differing_in_more_than_one_argument_are_not_alike(alice, bob, agent):
    same_words = pending_approvals(start(alice, agent, "write hi to a.txt")) + pending_approvals(start(alice, agent, "write hi to b.txt"))
    other_words = pending_approvals(start(alice, agent, "write bye to c.txt"))  # path and content differ from both
    same_file = pending_approvals(start(alice, agent, "write hi to a.txt"))  # the same call again: alike

    page = page_of(bob)

    assert group_ids(page) == [[a.pk for a in same_words + same_file]]
    assert f'id="approval-row-{other_words[0].pk}"' in page and f'id="approval-group-{other_words[0].pk}"' not in page


def test_a_group_varies_in_one_field_only(alice, bob, agent):
    """Each call alike to the first, but the group's calls differ in two fields between them: the
    second one to differ in another field starts a group of its own."""
    first = pending_approvals(start(alice, agent, "write hi to a.txt"))
    by_path = pending_approvals(start(alice, agent, "write hi to b.txt"))
    by_content = pending_approvals(start(alice, agent, "write bye to a.txt"))

    assert group_ids(page_of(bob)) == [[a.pk for a in first + by_path]]
    assert by_content[0].pk not in sum(group_ids(page_of(bob)), [])


def test_a_groups_buttons_are_inside_its_fold(alice, bob, agent):
    """A group is decided together only once opened: its buttons are in the fold with its calls."""
    pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))

    assert ancestors_of_group_forms(page_of(bob)) == [["article.approval-group", "details.row-open"]]


class _GroupForms(HTMLParser):
    VOID = {"input", "br", "img", "meta", "link", "hr", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.found = [], []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        if tag == "form" and "group-form" in classes:
            self.found.append([name for name in self.stack if name in ("article.approval-group", "details.row-open")])
        self.stack.append(f"{tag}.{classes[0]}" if classes else tag)

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop().split(".")[0] != tag:
            pass


def ancestors_of_group_forms(page: str) -> list[list[str]]:
    parser = _GroupForms()
    parser.feed(page)
    return parser.found


def test_a_group_never_holds_a_critical_call_nor_one_the_viewer_may_not_decide(alice, bob, agent, ops_agent):
    criticals = pending_approvals(start(alice, agent, "delete all files")) + pending_approvals(start(alice, agent, "delete all files"))
    own = pending_approvals(start(bob, ops_agent, "delete notes/x.txt and notes/y.txt"))  # four eyes: not bob's to approve

    page = page_of(bob)

    assert group_ids(page) == []
    assert all(f'id="approval-row-{a.pk}"' in page for a in criticals + own)
    assert inbox.alike_key(criticals[0]) is None


def test_an_edited_call_is_listed_with_the_version_shown(alice, bob, agent):
    first, second = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    Approval.objects.filter(pk=second.pk).update(edited_arguments={"path": "notes/b2.txt"}, edited_arguments_hash="e" * 64)
    second.refresh_from_db()
    assert second.shown_hash == "e" * 64

    page = page_of(bob)

    assert posted_versions(page, first.pk) == [f"{first.pk}:{first.shown_hash}", f"{second.pk}:{second.shown_hash}"]


def test_the_group_decides_exactly_the_calls_it_lists(alice, bob, agent):
    a, b, c = pending_approvals(start(alice, agent, "delete notes/a.txt, notes/b.txt and notes/c.txt"))
    other = pending_approvals(start(alice, agent, "delete notes/d.txt"))[0]  # alike, but not listed

    response = client_for(bob).post(
        "/approvals/group/", {"decision": "approve", "approval_ids": [f"{x.pk}:{x.shown_hash}" for x in (a, b, c)]}, headers=HTMX
    )

    assert response.status_code == 200 and "Approved 3." in response.content.decode()
    assert {x.status for x in Approval.objects.filter(pk__in=[a.pk, b.pk, c.pk])} == {Approval.Status.APPROVED}
    assert Approval.objects.get(pk=other.pk).status == Approval.Status.PENDING


def test_a_group_with_a_call_changed_meanwhile_decides_nothing(alice, bob, agent):
    a, b, c = pending_approvals(start(alice, agent, "delete notes/a.txt, notes/b.txt and notes/c.txt"))
    shown = [f"{x.pk}:{x.shown_hash}" for x in (a, b, c)]
    Approval.objects.filter(pk=b.pk).update(edited_arguments={"path": "notes/z.txt"}, edited_arguments_hash="0" * 64)

    response = client_for(bob).post("/approvals/group/", {"decision": "approve", "approval_ids": shown}, headers=HTMX)

    assert response.status_code == 409
    assert "Nothing was decided" in response.content.decode() and "edited meanwhile" in response.content.decode()
    assert response["HX-Trigger"] == "inbox-changed"  # the page re-reads the list: the new version shows
    assert set(Approval.objects.filter(pk__in=[a.pk, b.pk, c.pk]).values_list("status", flat=True)) == {Approval.Status.PENDING}
    assert not Approval.objects.exclude(chain_position=None).exists()  # no decision reached the audit chain


def test_a_group_posted_with_a_critical_call_decides_nothing(alice, bob, agent):
    a, b = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    critical = pending_approvals(start(alice, agent, "delete all files"))[0]
    shown = [f"{x.pk}:{x.shown_hash}" for x in (a, b, critical)]

    response = client_for(bob).post("/approvals/group/", {"decision": "approve", "approval_ids": shown}, headers=HTMX)

    assert response.status_code == 409 and "critical" in response.content.decode()
    assert Approval.objects.filter(status=Approval.Status.PENDING).count() == 3


def test_a_group_decision_is_for_approvers(alice, mallory, agent):
    a, b = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    shown = [f"{x.pk}:{x.shown_hash}" for x in (a, b)]

    assert client_for(alice).post("/approvals/group/", {"decision": "approve", "approval_ids": shown}).status_code == 403
    assert client_for(mallory).post("/approvals/group/", {"decision": "reject", "approval_ids": shown}).status_code == 403
    assert Approval.objects.filter(status=Approval.Status.PENDING).count() == 2


def test_each_row_shows_the_request_that_led_to_the_call_in_a_constant_number_of_queries(alice, bob, agent):
    start(alice, agent, "write first words to one.txt")
    client = client_for(bob)
    client.get("/approvals/")
    with CaptureQueriesContext(connection) as few:
        client.get("/approvals/")
    for n in range(6):
        start(alice, agent, f"write words number {n} to file{n}.txt")
    with CaptureQueriesContext(connection) as many:
        page = client.get("/approvals/").content.decode()

    assert "“write words number 3 to file3.txt”" in page
    assert "“write first words to one.txt”" in page
    assert len(many) == len(few)


def test_the_request_is_the_last_user_message_before_the_call(alice, bob, agent):
    conversation = start(alice, agent, "write one to a.txt")
    approval = pending_approvals(conversation)[0]

    [row] = inbox.inbox_approvals(bob, Filters())

    assert row.pk == approval.pk and row.request_text == "write one to a.txt"


def test_a_snoozed_call_leaves_only_that_approvers_inbox_and_count_for_an_hour(alice, bob, carol, agent):
    snoozed, kept = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))

    response = client_for(bob).post(f"/approvals/{snoozed.pk}/snooze/", headers=HTMX)

    assert response.status_code == 204 and response["HX-Trigger"] == "inbox-changed"
    bobs = page_of(bob)
    assert f'id="approval-row-{snoozed.pk}"' not in bobs and f'id="approval-row-{kept.pk}"' in bobs
    assert "Snoozed (1)" in bobs and "Approvals (1)" in re.sub(r"<[^>]+>", "", bobs)
    assert f'id="approval-row-{snoozed.pk}"' in page_of(carol)  # another approver still sees it
    until = Snooze.objects.get(user=bob).until
    snoozed_page = page_of(bob, "/approvals/?snoozed=1")
    assert f'id="approval-row-{snoozed.pk}"' in snoozed_page and f'id="approval-row-{kept.pk}"' not in snoozed_page
    assert f"snoozed until <time datetime=\"{until.isoformat()}\">{until:%H:%M} UTC</time>" in snoozed_page
    assert timedelta(minutes=59) < until - timezone.now() <= timedelta(hours=1)


def test_a_snooze_ends_after_its_hour_or_when_woken(alice, bob, agent):
    first, second = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))
    inbox.snooze(bob, [first.pk], until=timezone.now() - timedelta(seconds=1))  # an hour gone by
    inbox.snooze(bob, [second.pk])

    assert f'id="approval-row-{first.pk}"' in page_of(bob)
    client_for(bob).post(f"/approvals/{second.pk}/wake/", headers=HTMX)
    assert f'id="approval-row-{second.pk}"' in page_of(bob)
    assert not Snooze.objects.filter(approval=second).exists()


def test_only_approvers_snooze_and_only_what_they_may_see(alice, mallory, agent):
    approval = pending_approvals(start(alice, agent, "delete a.txt"))[0]

    assert client_for(alice).post(f"/approvals/{approval.pk}/snooze/").status_code == 403
    assert client_for(mallory).post(f"/approvals/{approval.pk}/snooze/").status_code == 403
    assert not Snooze.objects.exists()


def test_the_nav_counts_pending_approvals_on_every_page_for_approvers_in_one_query(alice, bob, agent):
    start(alice, agent, "delete a.txt and b.txt")
    start(alice, agent, "email x@example.com about y")
    bobs = client_for(bob)

    for url in ("/", "/rules/", "/approvals/history/"):
        text = re.sub(r"<[^>]+>", "", bobs.get(url).content.decode())
        assert "Approvals (3)" in text, url
    assert "Approvals (" not in client_for(alice).get("/").content.decode()

    with CaptureQueriesContext(connection) as queries:
        bobs.get("/")
    assert sum("approvals_snooze" in q["sql"] for q in queries) == 1  # the nav's count, snoozes left out


def test_the_nav_count_follows_decisions(alice, bob, agent):
    first, _ = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))
    client_for(bob).post(f"/approvals/dashboard/{first.pk}/decide/", {"decision": "reject", "shown_hash": first.shown_hash})

    assert "Approvals (1)" in re.sub(r"<[^>]+>", "", page_of(bob, "/"))
    rows = page_of(bob, "/approvals/", **HTMX)  # the list's re-read swaps the nav's count too
    assert 'id="nav-inbox-count" class="nav-count" hx-swap-oob="true"> (1)' in rows


def test_the_filters_are_kept_and_open_when_set(alice, bob, agent):
    start(alice, agent, "delete notes/a.txt")
    start(alice, agent, "email x@example.com about y")

    folded = page_of(bob, "/approvals/?q=notes")
    opened = page_of(bob, "/approvals/?tool=send_email&risk=high")

    assert 'value="notes"' in folded and '<details class="filters-fold">' in folded  # search stays on its line
    assert "delete_file" in folded and "send_email" not in folded
    assert '<details class="filters-fold" open>' in opened and 'value="send_email"' in opened
    assert '<option value="high" selected>' in opened


def test_stop_lives_in_the_rows_menu(alice, bob, agent):
    approval = pending_approvals(start(alice, agent, "delete a.txt"))[0]

    page = page_of(bob)

    row = page[page.index(f'id="approval-row-{approval.pk}"'):]
    menu = row[row.index('class="row-menu"'):row.index("</details>", row.index('class="row-menu"'))]
    assert "Stop conversation" in menu and "Snooze for an hour" in menu and "Open in conversation" in menu
    assert "{#" not in page and "#}" not in page


# Routes, quorum, reminders and escalation (issue 25)


def test_a_route_member_sees_only_what_the_route_sends_them_in_the_inbox_count_and_history(alice, bob, agent):
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    dana = member("dana", "finance")
    unrouted = start(alice, agent, "delete a.txt")  # before the route: decided as before routes
    finance_route(agent, quorum=1)
    routed = start(alice, agent, "delete b.txt")
    [mine] = pending_approvals(routed)

    page = page_of(dana)
    assert f'id="approval-row-{mine.pk}"' in page and 'data-count="1"' in page
    assert f'id="approval-row-{pending_approvals(unrouted)[0].pk}"' not in page
    assert "Approvals (1)" in re.sub(r"<[^>]+>", "", page_of(dana, "/")) and "Delegations" in page
    assert 'data-count="2"' in page_of(bob)  # a global approver still sees everything

    client_for(dana).post(f"/approvals/dashboard/{mine.pk}/decide/", {"decision": "approve", "shown_hash": mine.shown_hash})
    client_for(bob).post(f"/approvals/dashboard/{pending_approvals(unrouted)[0].pk}/decide/", {"decision": "reject", "shown_hash": pending_approvals(unrouted)[0].shown_hash})
    history = page_of(dana, "/approvals/history/")
    assert f'id="history-{mine.pk}"' in history and history.count('<tr id="history-') == 1
    assert client_for(dana).get(f"/conversations/{routed.pk}/").status_code == 200
    assert client_for(dana).get(f"/conversations/{unrouted.pk}/").status_code == 404


def test_a_route_member_decides_from_the_inbox_and_bulk_and_a_stranger_still_gets_403(alice, mallory, agent):
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    dana = member("dana", "finance")
    finance_route(agent, quorum=1)
    [first, second] = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))

    bulk = client_for(dana).post("/approvals/bulk/", {"decision": "reject", "approval_ids": [f"{first.pk}:{first.shown_hash}"]}, headers=HTMX)

    assert bulk.status_code == 200
    first.refresh_from_db()
    assert first.status == "rejected" and first.decided_by == dana
    assert client_for(mallory).get("/approvals/").status_code == 403
    assert client_for(mallory).post("/approvals/bulk/", {"decision": "reject", "approval_ids": [f"{second.pk}:{second.shown_hash}"]}).status_code == 403
    second.refresh_from_db()
    assert second.status == "pending"


def test_calls_that_need_several_approvals_are_never_grouped_and_each_row_shows_its_votes(alice, agent):
    from approvals.services import decide
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    dana, erin = member("dana", "finance"), member("erin", "finance")
    finance_route(agent)
    first, second = pending_approvals(start(alice, agent, "delete a.txt and b.txt"))
    decide(first.pk, user=dana, approve=True, via="dashboard", shown_hash=first.shown_hash)

    page = page_of(erin)
    assert group_ids(page) == [] and page.count('<article id="approval-row-') == 2
    row = page[page.index(f'id="approval-row-{first.pk}"'):]
    assert "1 of 2 approvals: dana" in row[:row.index("</summary>")]
    mine = page_of(dana)
    assert "You approved · 1 of 2" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", mine))


def test_reminded_and_escalated_calls_are_marked_in_the_inbox(alice, bob, agent):
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    member("dana", "finance")
    finance_route(agent, quorum=1, remind_after_seconds=60, escalate_after_seconds=120, escalate_to=["oncall"])
    reminded, escalated, fresh = pending_approvals(start(alice, agent, "delete a.txt, b.txt and c.txt"))
    Approval.objects.filter(pk=reminded.pk).update(reminded_at=timezone.now())
    Approval.objects.filter(pk=escalated.pk).update(reminded_at=timezone.now(), escalated_at=timezone.now())

    page = page_of(bob)

    def summary(approval) -> str:
        row = page[page.index(f'id="approval-row-{approval.pk}"'):]
        return row[:row.index("</summary>")]

    assert "row-reminded" in page[page.index(f'id="approval-row-{reminded.pk}"') - 200:page.index(f'id="approval-row-{reminded.pk}"') + 200]
    assert ">reminded</span>" in summary(reminded) and ">escalated</span>" not in summary(reminded)
    assert ">reminded</span>" in summary(escalated) and ">escalated</span>" in summary(escalated)
    assert ">reminded</span>" not in summary(fresh) and ">escalated</span>" not in summary(fresh)


def test_the_inbox_of_routed_calls_reads_votes_in_a_constant_number_of_queries(alice, agent):
    from approvals.services import decide
    from tests.approvals.cards.test_cards import finance_route
    from tests.approvals.conftest import member

    dana, erin = member("dana", "finance"), member("erin", "finance")
    finance_route(agent)

    def queries() -> int:
        for approval in Approval.objects.filter(status="pending"):
            if not approval.votes.exists():
                decide(approval.pk, user=dana, approve=True, via="dashboard", shown_hash=approval.shown_hash)
        client = client_for(erin)
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/approvals/").status_code == 200
        return len(captured)

    start(alice, agent, "delete a.txt")
    few = queries()
    start(alice, agent, "delete a.txt, b.txt and c.txt")
    assert queries() == few
