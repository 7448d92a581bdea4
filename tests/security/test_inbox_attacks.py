"""The inbox, the card's title and the nav's count as an outsider attacks them (issue 23): a group
decision decides exactly what it lists at the versions listed, or nothing, and only what the poster
may decide; a snooze is one approver's and decides nothing; the count tells nobody what they may not
see; a title built from what the model sent is text, never markup, never a crash."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from approvals import inbox
from approvals.cards import titles
from approvals.models import Approval, Snooze
from approvals.templatetags.approval_tags import call_title, target
from tests.conftest import client_for, pending_approvals, start_conversation as start
from toolservers.titles import describe_call as describe_mcp_call

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}
GROUP = "/approvals/group/"


def listed(*approvals: Approval) -> list[str]:
    return [f"{a.pk}:{a.shown_hash}" for a in approvals]


def post_group(user, values: list[str], decision: str = "approve"):
    return client_for(user).post(GROUP, {"decision": decision, "approval_ids": values}, headers=HTMX)


def statuses(*approvals: Approval) -> list[str]:
    return [Approval.objects.get(pk=a.pk).status for a in approvals]


# --- The group decision ------------------------------------------------------------------------


def test_a_group_never_lets_the_requester_approve_their_own_four_eyes_calls(bob, carol, ops_agent):
    mine = pending_approvals(start(bob, ops_agent, "delete notes/x.txt and notes/y.txt"))
    others = pending_approvals(start(carol, ops_agent, "delete notes/z.txt"))

    response = post_group(bob, listed(*mine, *others))

    assert response.status_code == 409
    assert statuses(*mine, *others) == ["pending"] * 3  # all or none: carol's call is not decided either


def test_a_group_is_for_approvers_only(alice, mallory, agent):
    calls = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))

    for user in (alice, mallory):  # the owner (who may decide each on its card) and a stranger
        assert post_group(user, listed(*calls)).status_code == 403
    assert statuses(*calls) == ["pending"] * 2


def test_a_group_never_answers_a_question_nor_approves_a_critical_call(alice, bob, agent):
    question = pending_approvals(start(alice, agent, "ask me which day suits"))[0]
    critical = pending_approvals(start(alice, agent, "delete all files"))[0]
    plain = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]

    for odd in (question, critical):
        assert post_group(bob, listed(odd, plain)).status_code == 409
    assert statuses(question, critical, plain) == ["pending"] * 3


def test_a_group_with_a_decided_or_expired_call_decides_nothing(alice, bob, agent):
    a, b, c = pending_approvals(start(alice, agent, "delete notes/a.txt, notes/b.txt and notes/c.txt"))
    client_for(bob).post(f"/approvals/dashboard/{a.pk}/decide/", {"decision": "reject", "shown_hash": a.shown_hash})
    Approval.objects.filter(pk=c.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert post_group(bob, listed(a, b)).status_code == 409
    assert post_group(bob, listed(b, c)).status_code == 409
    assert statuses(b) == ["pending"]


def test_a_group_names_each_calls_version(alice, bob, agent):
    """The grouped row's approve posts the ids and the versions it lists: an id without its version
    (whatever the call is now), or one id at two versions, is not what any row lists."""
    a, b = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))

    bare = post_group(bob, [f"{a.pk}:{a.shown_hash}", str(b.pk)])
    twice = post_group(bob, [f"{a.pk}:{a.shown_hash}", f"{b.pk}:{'0' * 64}", f"{b.pk}:{b.shown_hash}"])

    assert (bare.status_code, twice.status_code) == (400, 400)
    assert statuses(a, b) == ["pending"] * 2


def test_a_group_at_another_version_decides_nothing(alice, bob, agent):
    a, b = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))

    response = post_group(bob, [f"{a.pk}:{a.shown_hash}", f"{b.pk}:{'f' * 64}"])

    assert response.status_code == 409 and statuses(a, b) == ["pending"] * 2


@pytest.mark.parametrize(
    "values",
    [
        ["abc"], ["-1:" + "0" * 64], ["0:"], ["1:XYZ"], ["1:" + "a" * 65], [""], ["1:a:b"], ["9" * 30 + ":"],
        ["\x00"], ["1\u00b2:"], [f"{n}:" for n in range(1, 1200)],
    ],
)
def test_a_malformed_group_is_refused_whole_and_never_a_500(alice, bob, agent, values):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]

    response = post_group(bob, listed(call) + values)

    assert response.status_code == 400
    assert statuses(call) == ["pending"]


def test_a_group_is_posted_not_fetched_and_needs_its_csrf_token(alice, bob, agent):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]

    assert client_for(bob).get(GROUP, {"decision": "approve", "approval_ids": listed(call)}).status_code == 405
    assert client_for(bob, csrf=True).post(GROUP, {"decision": "approve", "approval_ids": listed(call)}).status_code == 403
    assert statuses(call) == ["pending"]


def test_calls_of_different_risk_are_never_one_group(alice, bob, agent):
    """A group's row says one risk (its first call's): a riskier alike call is a row of its own."""
    a, b, c = pending_approvals(start(alice, agent, "delete notes/a.txt, notes/b.txt and notes/c.txt"))
    Approval.objects.filter(pk=c.pk).update(risk="high" if a.risk != "high" else "medium")

    page = client_for(bob).get("/approvals/").content.decode()

    assert f'data-approval-ids="{a.pk} {b.pk}"' in page
    assert f'id="approval-row-{c.pk}"' in page and f'data-approval-ids="{a.pk} {b.pk} {c.pk}"' not in page


# --- Snooze and wake ---------------------------------------------------------------------------


def test_a_snooze_is_posted_with_its_token_by_an_approver_and_never_leaks_what_exists(alice, bob, mallory, agent):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]

    assert client_for(bob).get(f"/approvals/{call.pk}/snooze/").status_code == 405
    assert client_for(bob, csrf=True).post(f"/approvals/{call.pk}/snooze/").status_code == 403
    assert client_for(bob).post("/approvals/999999/snooze/").status_code == 404
    # A stranger meets the same refusal whether or not the id exists.
    assert client_for(mallory).post(f"/approvals/{call.pk}/snooze/").status_code == 403
    assert client_for(mallory).post("/approvals/999999/snooze/").status_code == 403
    assert client_for(mallory).post(f"/approvals/{call.pk}/wake/").status_code == 403
    assert not Snooze.objects.exists()


def test_a_snooze_takes_no_duration_and_a_snoozed_call_decides_and_expires_as_ever(alice, bob, carol, agent):
    snoozed, overdue = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    client_for(bob).post(f"/approvals/{snoozed.pk}/snooze/", {"until": "9999-12-31", "hours": "-5"}, headers=HTMX)
    inbox.snooze(bob, [overdue.pk])

    until = Snooze.objects.get(approval=snoozed).until
    assert timedelta(minutes=59) < until - timezone.now() <= timedelta(hours=1)  # the hour, whatever was posted
    assert f'id="approval-row-{snoozed.pk}"' in client_for(carol).get("/approvals/").content.decode()
    client_for(carol).post(f"/approvals/dashboard/{snoozed.pk}/decide/", {"decision": "approve", "shown_hash": snoozed.shown_hash})
    Approval.objects.filter(pk=overdue.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client_for(bob).post(f"/approvals/dashboard/{overdue.pk}/decide/", {"decision": "approve", "shown_hash": overdue.shown_hash})
    assert statuses(snoozed, overdue) == ["approved", "expired"]
    assert inbox.snoozed_count(bob) == 0  # a decided call is no longer counted as snoozed


def test_snoozing_a_decided_call_stores_nothing(alice, bob, agent):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]
    client_for(bob).post(f"/approvals/dashboard/{call.pk}/decide/", {"decision": "reject", "shown_hash": call.shown_hash})

    assert client_for(bob).post(f"/approvals/{call.pk}/snooze/", headers=HTMX).status_code == 204
    assert not Snooze.objects.exists()


# --- The nav's count -----------------------------------------------------------------------------


def test_pages_without_an_approver_never_count(alice, agent):
    start(alice, agent, "delete notes/a.txt")
    for client, url in ((client_for(alice), "/"), (client_for(alice), "/no-such-page/")):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code in (200, 404)
        assert not any("approvals_snooze" in q["sql"] for q in queries), url
    from django.test import Client

    for url in ("/accounts/login/", "/no-such-page/"):
        with CaptureQueriesContext(connection) as queries:
            response = Client().get(url)
        assert response.status_code in (200, 404) and "Approvals (" not in response.content.decode()
        assert not any("approvals_" in q["sql"] for q in queries), url


def test_the_count_leaves_out_only_the_viewers_own_snoozes(alice, bob, carol, agent):
    a, b = pending_approvals(start(alice, agent, "delete notes/a.txt and notes/b.txt"))
    inbox.snooze(carol, [a.pk])

    assert (inbox.pending_count(bob), inbox.pending_count(carol)) == (2, 1)


# --- Titles from what the model or a tool server sent --------------------------------------------

MARKUP = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def test_a_title_from_markup_in_the_arguments_is_text_on_the_card_and_in_the_inbox(alice, bob, agent):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]
    arguments = {"path": f"notes/{MARKUP}\u202e.txt"}
    call.tool_call.__class__.objects.filter(pk=call.tool_call_id).update(arguments=arguments)

    for user, url in ((bob, "/approvals/"), (alice, f"/conversations/{call.conversation_id}/")):
        page = client_for(user).get(url).content.decode()
        assert "<img src=x" not in page and "<script>alert(2)" not in page, url
        assert "\u202e" not in page, url  # shown as ⟨U+202E⟩, never obeyed


@pytest.mark.parametrize(
    "annotations",
    [{"title": MARKUP}, {"title": "Read\nnote\r\n" + "x" * 10_000}, {"title": 42}, {"title": None}, {"title": ["a"]}, "title"],
)
def test_a_hostile_servers_title_is_one_short_line_that_still_says_what_the_call_acts_on(annotations):
    title = titles.title("notes__delete_note", {"name": "a.txt"}, annotations)

    assert "\n" not in title and len(title) <= titles.MAX_TITLE_CHARS
    assert title.endswith("a.txt")


@pytest.mark.parametrize("returned", [None, 42, b"bytes", ["Delete"], {"a": 1}, "   ", RuntimeError("oops")])
def test_a_describer_that_fails_or_returns_no_text_leaves_the_name(returned):
    def describer(name, arguments, annotations):
        if isinstance(returned, Exception):
            raise returned
        return returned if name == "attack_tool" else ""

    titles.add_describer(describer)
    try:
        assert titles.title("attack_tool", {"path": "a.txt"}) == "attack_tool"
    finally:
        titles._describers.remove(describer)


@pytest.mark.parametrize(
    "arguments",
    [{"name": {"nested": MARKUP}}, {"name": ["a", "b"]}, {"name": True}, {"name": 10**400 if False else 1e308}, {"name": "\u200b"}],
)
def test_an_mcp_call_with_odd_arguments_has_a_title(arguments):
    assert describe_mcp_call("notes__delete_note", arguments, None).startswith("Delete note")


def test_call_title_of_a_call_with_non_object_arguments_is_its_name(alice, agent):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]
    call.tool_call.arguments = ["not", "an", "object"]

    assert call_title(call) == "delete_file"


@pytest.mark.parametrize(
    "query",
    [
        "snoozed=1&older_than=-5", "snoozed=%00", "older_than=99999999999999999999", "q=%00%ud800", "q=" + "x" * 5000,
        "risk=<script>&kind=nope&agent=%27&tool=%22&requester=%00", "snoozed=1&snoozed=0&q=a&q=b",
    ],
)
def test_odd_inbox_queries_are_a_page_never_a_500(alice, bob, agent, query):
    start(alice, agent, "delete notes/a.txt")

    for headers in ({}, HTMX):
        response = client_for(bob).get(f"/approvals/?{query}", headers=headers)
        assert response.status_code in (200, 400), query
        assert "<script>" not in response.content.decode()


@pytest.mark.parametrize("hidden", ["\u2028", "\u2029", "\x85", "\x1c", "\x1f"])
def test_a_line_separator_in_the_arguments_is_shown_in_the_title_and_target_not_folded_away(alice, agent, hidden):
    call = pending_approvals(start(alice, agent, "delete notes/a.txt"))[0]
    call.tool_call.arguments = {"path": f"notes/a.txt{hidden}"}
    shown = f"U+{ord(hidden):04X}"

    assert shown in call_title(call) and shown in target(call)
    assert titles.title("notes__delete_note", {"name": f"a{hidden}.txt"}, {"title": f"Remove{hidden}"}).count(hidden) == 2
