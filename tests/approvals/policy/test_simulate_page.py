"""The rules page's "New rule" form (issue 28): Simulate shows what the rule would have done (counts,
reasons, samples linked to their calls) and saves nothing; Save makes it; with htmx and without;
the effect offers "Ask a human"; who may simulate what, and bad input, as the API says it."""
import pytest
from django.urls import reverse

from approvals.models import Rule
from tests.conftest import client_for
from tests.approvals.policy.test_simulate import seed

NEW = "/rules/new/"
HTMX = {"HX-Request": "true"}


@pytest.fixture
def calls(alice, make_conversation):
    conversation = make_conversation(alice, title="notes")
    plain = seed(conversation, arguments={"path": "notes/a.txt"})
    critical = seed(conversation, arguments={"path": "notes/b.txt"}, risk="critical")
    return conversation, plain, critical


def form(chat, **fields) -> dict:
    return {"effect": "allow", "tool": "write_file", "conditions": "path = notes/*", "scope": "conversation",
            "conversation": str(chat.pk), "days": "30", **fields}


def test_the_form_offers_ask_a_human_and_only_the_scopes_the_user_may_use(alice, bob, agent, make_conversation):
    make_conversation(alice, title="my chat")
    html = client_for(alice).get("/rules/").content.decode()
    assert '<option value="ask">Ask a human</option>' in html
    assert '<option value="allow" selected>Allow</option>' in html and '<option value="deny">Deny</option>' in html
    assert 'value="agent_user"' in html and 'value="global"' not in html and "my chat" in html
    assert 'value="global"' in client_for(bob).get("/rules/").content.decode()


def test_simulate_shows_the_counts_reasons_and_samples_and_saves_nothing(alice, calls):
    conversation, (plain_call, plain), (critical_call, critical) = calls
    answer = client_for(alice).post(NEW, form(conversation, step="simulate"), headers=HTMX)
    assert answer.status_code == 200
    html = answer.content.decode()
    assert html.startswith("{% comment") is False and 'id="simulation"' in html
    assert '<strong data-count="allow">1</strong>' in html and '<strong data-count="deny">0</strong>' in html
    assert 'data-reason="critical"><strong>1</strong>' in html
    page = reverse("chat:conversation", args=[conversation.pk])
    assert f'href="{page}#tool-call-{plain_call.pk}">approval #{plain.pk}</a>' in html
    assert f'href="{page}#tool-call-{critical_call.pk}">approval #{critical.pk}</a>' in html
    assert 'name="step" value="save"' in html  # the Save button comes with the simulation
    assert not Rule.objects.exists()


def test_without_javascript_simulate_returns_the_page_with_the_form_filled(alice, calls):
    conversation, *_ = calls
    html = client_for(alice).post(NEW, form(conversation, effect="ask")).content.decode()
    assert "<h1>Rules</h1>" in html and 'id="new-rule" open' in html
    assert '<option value="ask" selected>Ask a human</option>' in html and "path = notes/*</textarea>" in html
    assert '<strong data-count="ask">2</strong>' in html
    assert not Rule.objects.exists()


def test_save_makes_the_rule_as_the_api_would(alice, calls):
    conversation, *_ = calls
    saved = client_for(alice).post(NEW, form(conversation, effect="ask", step="save", max_uses="3", note="mind notes"), follow=True)
    assert saved.redirect_chain[-1][0] == "/rules/"
    rule = Rule.objects.get()
    assert (rule.effect, rule.tool, rule.arguments, rule.scope, rule.conversation_id, rule.max_uses, rule.note, rule.created_by) == (
        "ask", "write_file", {"path": "notes/*"}, "conversation", conversation.pk, 3, "mind notes", conversation.owner,
    )
    assert f"Rule #{rule.pk} saved" in saved.content.decode()
    htmx = client_for(alice).post(NEW, form(conversation, step="save", conditions="command ~ rm .*"), headers=HTMX)
    assert htmx.status_code == 200 and htmx.headers["HX-Redirect"] == "/rules/"
    assert Rule.objects.get(effect="allow").arguments == {"command": {"regex": "rm .*"}}


def test_who_may_simulate_is_who_may_make_the_rule(alice, bob, mallory, agent, calls):
    conversation, *_ = calls
    assert client_for(mallory).post(NEW, form(conversation), headers=HTMX).status_code == 404
    assert client_for(alice).post(NEW, form(conversation, scope="global"), headers=HTMX).status_code == 403
    assert client_for(bob).post(NEW, form(conversation, scope="global"), headers=HTMX).status_code == 200
    assert client_for(bob).post(NEW, form(conversation, scope="agent", agent=agent.slug), headers=HTMX).status_code == 200
    assert client_for(mallory).post(NEW, form(conversation, step="save")).status_code == 404
    assert not Rule.objects.exists()


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"conditions": "just words"}, "name = glob"),
        ({"conditions": "path = a\npath = b"}, "already"),
        ({"conditions": "path ~ ("}, "does not compile"),
        ({"tool": ""}, "`tool`"),
        ({"effect": "maybe"}, "effect"),
        ({"conversation": "not-a-uuid"}, "Choose a conversation"),
        ({"expires": "tomorrow"}, "Expires"),
        ({"expires": "2001-01-01T00:00"}, "past"),
        ({"max_uses": "-1"}, "Max uses"),
        ({"max_uses": "0"}, "max_uses"),
        ({"days": "0"}, "days"),
        ({"days": "٣"}, "Days"),
        ({"conditions": "path = " + "a" * 10_001}, "at most 10000"),
    ],
)
def test_bad_input_says_why_and_nothing_is_made(alice, calls, fields, words):
    conversation, *_ = calls
    for headers in (HTMX, {}):
        for step in ("simulate", "save"):
            refused = client_for(alice).post(NEW, form(conversation, step=step, **fields), headers=headers)
            assert refused.status_code == 400, refused.content
            assert words in refused.content.decode()
    assert not Rule.objects.exists()


def test_the_form_needs_login_csrf_and_post(alice, calls, client):
    conversation, *_ = calls
    assert client.post(NEW, form(conversation)).status_code == 302  # to the login page
    assert client_for(alice, csrf=True).post(NEW, form(conversation)).status_code == 403
    assert client_for(alice).get(NEW).status_code == 405
    assert not Rule.objects.exists()


def test_markup_in_a_tool_name_is_shown_as_text(alice, make_conversation):
    conversation = make_conversation(alice)
    seed(conversation, tool="<img src=x onerror=alert(1)>", arguments={})
    html = client_for(alice).post(NEW, form(conversation, tool="<img*", conditions=""), headers=HTMX).content.decode()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
