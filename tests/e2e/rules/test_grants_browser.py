"""Time-boxed grants on a card, in Chromium against the real stack: the "Always…" menu offers
"Approve for 10 minutes in this conversation" and "… 1 hour"; one click approves the call and saves
the expiring rule, and the next such call in the conversation runs with no card waiting. A critical
call's menu offers neither."""
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import Rule
from tests.e2e.browser import (  # noqa: F401  (browser, new_page and page are fixtures)
    browser,
    button,
    card,
    new_page,
    page,
    status_bar,
)
from tests.e2e.rules.conftest import opened

pytestmark = pytest.mark.e2e
TEN_MINUTES = "Approve for 10 minutes in this conversation"
ONE_HOUR = "Approve for 1 hour in this conversation"


def test_approve_for_10_minutes_from_the_card_then_the_same_call_runs_with_no_card(page, alice, agent, api_for):
    conversation_id = opened(page, api_for(alice), alice, "write one to notes/a.txt")
    first = card(page, "write_file", "notes/a.txt")
    first.get_by_text("More ways to decide calls like this…").click()
    expect(button(first, ONE_HOUR)).to_be_visible()
    before = timezone.now()
    button(first, TEN_MINUTES).click()

    expect(first).to_have_attribute("data-status", "succeeded")
    rule = Rule.objects.get()
    assert (rule.effect, rule.scope, str(rule.conversation_id), rule.arguments) == ("allow", "conversation", conversation_id, {"path": "notes/*"})
    assert before + timedelta(minutes=10) <= rule.expires_at <= timezone.now() + timedelta(minutes=10)

    page.get_by_label("Message", exact=True).fill("write two to notes/b.txt")
    button(page, "Send").click()
    second = card(page, "write_file", "notes/b.txt")
    expect(second).to_have_attribute("data-status", "succeeded")
    expect(second).to_contain_text(f"Allowed by rule #{rule.pk}: allow write_file path notes/* for 10 minutes in this conversation")
    expect(status_bar(page)).to_have_attribute("data-status", "idle")


def test_a_critical_calls_menu_offers_no_grant(page, alice, agent, api_for):
    opened(page, api_for(alice), alice, "delete all files")
    critical = card(page, "delete_all_files")
    critical.get_by_text("More ways to decide calls like this…").click()
    expect(button(critical, "Reject and always deny")).to_be_visible()
    expect(critical.get_by_role("button", name=TEN_MINUTES)).to_have_count(0)
    expect(critical.get_by_role("button", name=ONE_HOUR)).to_have_count(0)
