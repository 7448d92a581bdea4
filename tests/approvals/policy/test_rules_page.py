"""The rules page (/rules/): who sees which rules, Disable/Enable and Delete as plain forms and with
htmx, and the unhappy paths (login, CSRF, another user's rule, the wrong method, markup in a rule)."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals.policy import rulemaking
from approvals.models import Approval, Rule
from tests.conftest import client_for, start_conversation

PAGE = "/rules/"
HTMX = {"HX-Request": "true"}


def enabled_url(rule: Rule) -> str:
    return reverse("rules:enabled", args=[rule.pk])


def delete_url(rule: Rule) -> str:
    return reverse("rules:delete", args=[rule.pk])


def mine(user, agent, **fields) -> Rule:
    """A rule of `user`'s own conversations with the demo agent (the scope everyone may use)."""
    defaults = {"effect": "allow", "tool": "write_file", "arguments": {}, "scope": Rule.Scope.AGENT_USER, "agent": agent.slug}
    return rulemaking.create(user, **(defaults | fields))


def stored(rule: Rule) -> Rule:
    return Rule.objects.get(pk=rule.pk)


def row_id(rule: Rule) -> str:
    return f'id="rule-{rule.pk}"'


def test_the_page_and_its_posts_need_a_login(alice, agent):
    rule = mine(alice, agent)
    for response in (Client().get(PAGE), Client().post(enabled_url(rule), {"enabled": "0"}), Client().post(delete_url(rule))):
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")
    assert (stored(rule).enabled, stored(rule).deleted_at) == (True, None)


def test_the_nav_links_to_the_page_for_every_signed_in_user(mallory):
    response = client_for(mallory).get("/")
    assert response.status_code == 200
    assert f'href="{PAGE}"' in response.content.decode()


def test_a_user_sees_their_own_rules_and_not_another_users(alice, mallory, agent, make_conversation):
    conversation = make_conversation(alice, title="Alice's notes")
    own = mine(alice, agent, tool="write_file", note="alice writes")
    in_conversation = rulemaking.create(
        alice, effect="deny", tool="delete_*", arguments={"path": "notes/*"}, scope=Rule.Scope.CONVERSATION,
        conversation_id=conversation.pk,
    )
    others = mine(mallory, agent, tool="send_email", note="mallory mails")

    response = client_for(alice).get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert row_id(own) in html and "alice writes" in html
    assert row_id(in_conversation) in html and "delete_*" in html
    assert reverse("chat:conversation", args=[conversation.pk]) in html and "Alice&#x27;s notes" in html
    assert row_id(others) not in html and "mallory mails" not in html
    assert "also see every agent-wide and global rule" not in html


def test_conditions_are_shown_as_globs_and_regexes_with_uses_and_last_use(alice, agent):
    rule = mine(alice, agent, arguments={"path": "notes/*", "to": {"regex": r"\w+@example\.com"}}, max_uses=5)
    html = client_for(alice).get(PAGE).content.decode()
    assert "<code>path</code> is <code>notes/*</code>" in html
    assert r"<code>to</code> matches regex <code>\w+@example\.com</code>" in html
    assert "0 of 5 used" in html and "last: never" in html
    assert row_id(rule) in html


def test_an_approver_sees_agent_wide_and_global_rules_and_a_non_approver_does_not(alice, bob, mallory, agent):
    agent_wide = rulemaking.create(bob, effect="allow", tool="read_file", arguments={}, scope=Rule.Scope.AGENT, agent=agent.slug)
    everywhere = rulemaking.create(bob, effect="deny", tool="send_email", arguments={}, scope=Rule.Scope.GLOBAL, note="no mail")

    bobs = client_for(bob).get(PAGE).content.decode()
    assert row_id(agent_wide) in bobs and row_id(everywhere) in bobs
    assert "also see every agent-wide and global rule" in bobs
    assert "every agent, everyone" in bobs and "everyone&#x27;s conversations" in bobs

    for user in (alice, mallory):
        html = client_for(user).get(PAGE).content.decode()
        assert row_id(agent_wide) not in html and row_id(everywhere) not in html


def test_an_approver_sees_another_approvers_global_rule(bob, carol):
    everywhere = rulemaking.create(carol, effect="deny", tool="send_email", arguments={}, scope=Rule.Scope.GLOBAL)
    assert row_id(everywhere) in client_for(bob).get(PAGE).content.decode()


def test_no_rules_says_how_to_make_one(mallory):
    html = client_for(mallory).get(PAGE).content.decode()
    assert "No rules yet" in html and "Always…" in html


def test_disable_then_enable_toggles_the_rule_and_the_page_shows_it(alice, agent):
    rule = mine(alice, agent)
    client = client_for(alice)

    response = client.post(enabled_url(rule), {"enabled": "0"})
    assert response.status_code == 302 and response["Location"] == PAGE
    assert stored(rule).enabled is False
    html = client.get(PAGE).content.decode()
    assert 'data-enabled="false"' in html and ">disabled<" in html and ">Enable<" in html

    response = client.post(enabled_url(rule), {"enabled": "1"})
    assert response.status_code == 302
    assert stored(rule).enabled is True
    html = client.get(PAGE).content.decode()
    assert 'data-enabled="true"' in html and ">enabled<" in html and ">Disable<" in html


def test_with_htmx_the_toggle_returns_the_row_alone(alice, agent):
    rule = mine(alice, agent)
    response = client_for(alice).post(enabled_url(rule), {"enabled": "0"}, headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith(f'<tr {row_id(rule)}') and ">Enable<" in html and "<html" not in html
    assert stored(rule).enabled is False


def test_a_toggle_without_a_clear_value_is_refused(alice, agent):
    rule = mine(alice, agent)
    response = client_for(alice).post(enabled_url(rule), {"enabled": "maybe"})
    assert response.status_code == 400
    assert stored(rule).enabled is True


@pytest.mark.django_db(transaction=True)
def test_delete_hides_the_rule_but_keeps_it_and_the_decisions_it_made(alice, agent):
    rule = mine(alice, agent)
    conversation = start_conversation(alice, agent, "write hi to a.txt")  # the rule approves it at once
    approval = Approval.objects.get(conversation=conversation)
    assert (approval.status, approval.decided_via, approval.rule_id) == ("approved", "rule", rule.pk)
    client = client_for(alice)
    assert row_id(rule) in client.get(PAGE).content.decode()

    response = client.post(delete_url(rule))
    assert response.status_code == 302 and response["Location"] == PAGE
    kept = stored(rule)
    assert kept.deleted_at is not None and kept.enabled is False
    assert row_id(rule) not in client.get(PAGE).content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.rule) == ("approved", kept)


def test_with_htmx_delete_returns_nothing_so_the_row_goes(alice, agent):
    rule = mine(alice, agent)
    response = client_for(alice).post(delete_url(rule), headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode()  # no row, and the page's status line says what happened
    assert "<tr" not in html and f"Rule #{rule.pk} deleted" in html and 'hx-swap-oob="innerHTML"' in html
    assert stored(rule).deleted_at is not None


def test_a_deleted_rule_cannot_be_toggled_or_deleted_again(alice, agent):
    rule = mine(alice, agent)
    client = client_for(alice)
    client.post(delete_url(rule))
    first = stored(rule).deleted_at
    assert client.post(enabled_url(rule), {"enabled": "1"}).status_code == 404
    assert client.post(delete_url(rule)).status_code == 404
    assert (stored(rule).enabled, stored(rule).deleted_at) == (False, first)


def test_posts_without_a_csrf_token_are_refused(alice, agent):
    rule = mine(alice, agent)
    client = client_for(alice, csrf=True)
    assert client.post(enabled_url(rule), {"enabled": "0"}).status_code == 403
    assert client.post(delete_url(rule)).status_code == 403
    assert (stored(rule).enabled, stored(rule).deleted_at) == (True, None)


def test_another_users_rule_is_not_found(alice, mallory, agent):
    rule = mine(alice, agent)
    client = client_for(mallory)
    assert client.post(enabled_url(rule), {"enabled": "0"}).status_code == 404
    assert client.post(delete_url(rule)).status_code == 404
    assert client.post(reverse("rules:delete", args=[rule.pk + 1000])).status_code == 404
    assert client.post(reverse("rules:delete", args=[2**70])).status_code == 404  # past what the database holds
    assert (stored(rule).enabled, stored(rule).deleted_at) == (True, None)


def test_a_non_approver_cannot_touch_a_global_rule(bob, mallory):
    everywhere = rulemaking.create(bob, effect="deny", tool="send_email", arguments={}, scope=Rule.Scope.GLOBAL)
    assert client_for(mallory).post(enabled_url(everywhere), {"enabled": "0"}).status_code == 404
    assert client_for(mallory).post(delete_url(everywhere)).status_code == 404
    assert (stored(everywhere).enabled, stored(everywhere).deleted_at) == (True, None)


def test_the_posts_refuse_get_and_the_page_refuses_post(alice, agent):
    rule = mine(alice, agent)
    client = client_for(alice)
    assert client.get(enabled_url(rule)).status_code == 405
    assert client.get(delete_url(rule)).status_code == 405
    assert client.post(PAGE).status_code == 405
    assert stored(rule).enabled is True


def test_markup_in_a_rule_is_shown_escaped(alice, agent):
    rule = mine(alice, agent, tool="<script>alert(1)</script>", note="<script>alert(2)</script>",
                arguments={"<b>path</b>": {"regex": "<img src=x onerror=alert(3)>"}})
    html = client_for(alice).get(PAGE).content.decode()
    assert row_id(rule) in html
    assert "<script>alert" not in html and "<b>path" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(3)&gt;" in html


def test_invisible_characters_in_a_rule_are_revealed(alice, agent):
    mine(alice, agent, note="ok\u202etxt.exe")
    html = client_for(alice).get(PAGE).content.decode()
    assert "\u202e" not in html and "U+202E" in html


def test_the_page_reads_a_constant_number_of_queries(alice, agent, make_conversation, django_assert_max_num_queries):
    client = client_for(alice)
    mine(alice, agent)
    with CaptureQueriesContext(connection) as one:
        client.get(PAGE)
    for n in range(5):
        conversation = make_conversation(alice, title=f"c{n}")
        rulemaking.create(alice, effect="deny", tool="x", arguments={}, scope=Rule.Scope.CONVERSATION, conversation_id=conversation.pk)
        mine(alice, agent, tool=f"t{n}")
    with django_assert_max_num_queries(len(one)):
        client.get(PAGE)


def test_a_rule_that_no_longer_decides_says_why(alice, agent):
    used_up = mine(alice, agent, tool="t1", max_uses=1)
    expired = mine(alice, agent, tool="t2")
    Rule.objects.filter(pk=used_up.pk).update(uses=1, last_used_at=timezone.now())
    Rule.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    html = client_for(alice).get(PAGE).content.decode()
    assert ">used up<" in html and "1 of 1 used" in html and "last: never" not in html.split(row_id(used_up))[1].split("</tr>")[0]
    assert ">expired<" in html


def test_the_owner_cannot_disable_or_delete_an_approvers_rule_in_their_conversation(alice, bob, agent):
    conversation = start_conversation(alice, agent, "read x.txt")
    theirs = rulemaking.create(bob, effect="deny", tool="send_email", arguments={"to": "*@competitor.test"},
                               scope=Rule.Scope.CONVERSATION, conversation_id=conversation.pk)
    client = client_for(alice)
    page = client.get(PAGE).content.decode()
    assert row_id(theirs) in page and "only an approver may change it" in page
    assert enabled_url(theirs) not in page and delete_url(theirs) not in page

    off = client.post(enabled_url(theirs), {"enabled": "0"}, headers=HTMX)
    gone = client.post(delete_url(theirs), headers=HTMX)

    assert (off.status_code, gone.status_code) == (403, 403)
    assert "approver" in off.content.decode() and "approver" in gone.content.decode()
    assert stored(theirs).enabled and stored(theirs).deleted_at is None
    assert client_for(bob).post(delete_url(theirs), headers=HTMX).status_code == 200  # its maker may
    assert stored(theirs).deleted_at is not None
