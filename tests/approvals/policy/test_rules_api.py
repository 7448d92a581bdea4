"""Rules made by people (issue 14): the rules API and its scopes, "remember" on a decision, the
card's "Always…" form, trust suggestions and the rejection contract, through the loop with the
scripted model (eager Celery)."""
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import audit
from approvals.models import Approval, Rule
from chat.models import Conversation, ToolCall
from tests.conftest import client_for, last_reply, pending_approvals, say, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


# --- The rules API ----------------------------------------------------------------------------------


def test_a_user_makes_lists_disables_and_deletes_their_own_rules(alice, agent, api_as):
    api = api_as(alice)
    conversation = start_conversation(alice, agent, "read x.txt")
    made = api.post("rules", {"effect": "allow", "tool": "write_file", "arguments": {"path": "notes/*"},
                              "scope": "conversation", "conversation_id": str(conversation.pk), "max_uses": 5, "note": "notes"})
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["id"] and body["uses"] == 0 and body["max_uses"] == 5 and body["created_by"] == "alice"
    assert (body["scope"], body["conversation_id"], body["agent"]) == ("conversation", str(conversation.pk), None)
    mine = api.post("rules", {"effect": "deny", "tool": "delete_*", "scope": "agent_user", "agent": agent.slug})
    assert mine.status_code == 201 and mine.json()["agent"] == agent.slug

    listed = api.get("rules").json()
    assert [item["id"] for item in listed["items"]] == [mine.json()["id"], body["id"]] and listed["count"] == 2

    off = api.patch(f"rules/{body['id']}", {"enabled": False})
    assert off.status_code == 200 and off.json()["enabled"] is False
    assert api.client.delete(f"/api/rules/{body['id']}", headers=api.headers).status_code == 204
    assert [item["id"] for item in api.get("rules").json()["items"]] == [mine.json()["id"]]
    removed = Rule.objects.get(pk=body["id"])
    assert removed.deleted_at is not None and not removed.enabled
    assert api.delete(f"rules/{body['id']}").status_code == 404  # gone for good


def test_agent_wide_and_global_rules_are_for_approvers_only(alice, bob, agent, api_as):
    for scope, extra in (("agent", {"agent": agent.slug}), ("global", {})):
        refused = api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "scope": scope, **extra})
        assert refused.status_code == 403, refused.json()
        made = api_as(bob).post("rules", {"effect": "allow", "tool": "write_file", "scope": scope, **extra})
        assert made.status_code == 201, made.json()
    assert Rule.objects.filter(created_by=alice).count() == 0
    # An approver's agent-wide and global rules are listed for every approver, never for alice.
    assert api_as(alice).get("rules").json()["count"] == 0
    assert api_as(bob).get("rules").json()["count"] == 2


def test_another_users_conversation_rule_or_agent_is_not_found(alice, mallory, agent, api_as):
    conversation = start_conversation(alice, agent, "read x.txt")
    api = api_as(mallory)
    stolen = api.post("rules", {"effect": "allow", "tool": "*", "scope": "conversation", "conversation_id": str(conversation.pk)})
    assert stolen.status_code == 404
    unknown = api.post("rules", {"effect": "allow", "tool": "*", "scope": "agent_user", "agent": "nope"})
    assert unknown.status_code == 404
    theirs = api_as(alice).post("rules", {"effect": "deny", "tool": "*", "scope": "conversation", "conversation_id": str(conversation.pk)})
    assert api.delete(f"rules/{theirs.json()['id']}").status_code == 404
    assert api.patch(f"rules/{theirs.json()['id']}", {"enabled": False}).status_code == 404
    assert api.get("rules").json()["count"] == 0
    assert Rule.objects.get(pk=theirs.json()["id"]).enabled


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"tool": "", "scope": "agent_user", "agent": "demo"}, "`tool`"),
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "arguments": {"path": {"regex": "("}}}, "does not compile"),
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "arguments": {"content": {"regex": "(a)\\1"}}}, "does not compile"),
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "arguments": {"content": {"regex": "a" * 201}}}, "200"),
        # RE2 is linear in the text times its program's size: an 8,000-instruction program is refused.
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "arguments": {"content": {"regex": "(?:.{0,900}a){1,}c"}}}, "too large"),
        ({"tool": "web_fetch", "scope": "agent_user", "agent": "demo", "arguments": {"url": "https:/*"}}, "https://docs.vendor.test/*"),
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "arguments": {"path": 3}}, "glob"),
        ({"tool": "x", "scope": "conversation"}, "conversation_id"),
        ({"tool": "x", "scope": "agent_user"}, "agent"),
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "expires_at": "2001-01-01T00:00:00Z"}, "past"),
        ({"tool": "x", "scope": "agent_user", "agent": "demo", "note": "n" * 501}, "note"),
        ({"tool": "x\u0000", "scope": "agent_user", "agent": "demo"}, ""),
    ],
)
def test_a_rule_that_says_nothing_valid_is_refused_with_why(alice, agent, api_as, body, words):
    refused = api_as(alice).post("rules", {"effect": "allow", **body})
    assert refused.status_code in (400, 422), refused.content
    assert words in refused.json()["detail"] if refused.status_code == 400 and words else True
    assert not Rule.objects.exists()


def test_a_max_uses_rule_says_how_often_it_was_used(alice, agent, api_as):
    api = api_as(alice)
    made = api.post("rules", {"effect": "allow", "tool": "write_file", "scope": "agent_user", "agent": agent.slug, "max_uses": 1}).json()
    assert start_conversation(alice, agent, "write hi to a.txt").status == Conversation.Status.IDLE
    assert start_conversation(alice, agent, "write hi to b.txt").status == Conversation.Status.WAITING_FOR_APPROVAL
    [listed] = api.get("rules").json()["items"]
    assert (listed["id"], listed["uses"]) == (made["id"], 1) and listed["last_used_at"]


# --- Remember: decide and make the rule in one step --------------------------------------------------


def test_approve_and_remember_in_this_conversation_then_the_same_kind_of_call_runs_unasked(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    decided = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "remember": {"scope": "conversation"}})
    assert decided.status_code == 200, decided.json()
    assert (decided.json()["status"], decided.json()["decided_via"]) == ("approved", "api")
    rule = Rule.objects.get()
    assert (rule.effect, rule.tool, rule.arguments, rule.scope, rule.conversation_id, rule.created_by) == (
        "allow", "write_file", {"path": "notes/*"}, "conversation", conversation.pk, alice,
    )
    assert rule.note == "always allow write_file path notes/* in this conversation"

    say(conversation, alice, "write bye to notes/b.txt")
    assert conversation.status == Conversation.Status.IDLE
    automatic = Approval.objects.filter(conversation=conversation).latest("pk")
    assert (automatic.status, automatic.decided_via, automatic.decided_by, automatic.rule) == ("approved", "rule", None, rule)
    assert last_reply(conversation).startswith("I did write notes/b.txt")
    assert say(conversation, alice, "write hi to other.txt").status == Conversation.Status.WAITING_FOR_APPROVAL
    assert audit.verify().is_intact


def test_reject_and_remember_with_this_agent_denies_in_every_own_conversation(alice, agent, api_as):
    first = start_conversation(alice, agent, "delete a.txt")
    [approval] = pending_approvals(first)
    decided = api_as(alice).post(
        f"approvals/{approval.pk}/decision",
        {"decision": "reject", "reason": "keep files", "remember": {"scope": "agent_user", "arguments": {}, "note": "no deletes"}},
    )
    assert decided.status_code == 200 and decided.json()["rejection_reason"] == "keep files"
    rule = Rule.objects.get()
    assert (rule.effect, rule.tool, rule.arguments, rule.scope, rule.agent) == ("deny", "delete_file", {}, "agent_user", agent)
    second = start_conversation(alice, agent, "delete b.txt")
    assert second.status == Conversation.Status.IDLE
    assert last_reply(second) == f"I did not delete b.txt (Denied by rule #{rule.pk}: no deletes)."


def test_a_remember_the_caller_may_not_make_decides_nothing(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    refused = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "remember": {"scope": "global"}})
    assert refused.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending" and not Rule.objects.exists()
    bad = api_as(alice).post(
        f"approvals/{approval.pk}/decision", {"decision": "approve", "remember": {"scope": "conversation", "arguments": {"path": {"regex": "["}}}},
    )
    assert bad.status_code == 400
    approval.refresh_from_db()
    assert approval.status == "pending" and not Rule.objects.exists()


def test_a_decision_that_loses_the_race_saves_no_rule(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    assert api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject"}).status_code == 200
    late = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "remember": {"scope": "conversation"}})
    assert late.status_code == 409 and not Rule.objects.exists()


def test_a_question_is_not_remembered(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "ask me what to call the file")
    [approval] = pending_approvals(conversation)
    refused = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "remember": {"scope": "conversation"}})
    assert refused.status_code == 400 and not Rule.objects.exists()


# --- The rejection contract -------------------------------------------------------------------------


def test_the_same_call_just_rejected_is_rejected_again_at_once_and_the_model_is_told(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "delete a.txt")
    [first] = pending_approvals(conversation)
    api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "reject", "reason": "I still need it"})
    conversation.refresh_from_db()

    say(conversation, alice, "delete a.txt")
    assert conversation.status == Conversation.Status.IDLE  # nobody was asked
    again = Approval.objects.filter(conversation=conversation).latest("pk")
    assert (again.status, again.decided_via, again.decided_by, again.rejection_reason, again.repeat_of) == (
        "rejected", "repeat", None, "I still need it", first,
    )
    item = api_as(alice).get("approvals", status="rejected").json()["items"][-1]
    assert (item["id"], item["status"], item["decided_via"], item["decided_by"], item["rejection_reason"]) == (
        again.pk, "rejected", "repeat", None, "I still need it",
    )
    result = ToolCall.objects.get(pk=again.tool_call_id).result
    assert result.startswith("Already rejected by alice at ") and "I still need it" in result and "do not ask for it again" in result
    assert last_reply(conversation).startswith("I did not delete a.txt (Already rejected by alice")
    # Other arguments are asked as usual; so is the same call in another conversation.
    assert say(conversation, alice, "delete b.txt").status == Conversation.Status.WAITING_FOR_APPROVAL
    assert start_conversation(alice, agent, "delete a.txt").status == Conversation.Status.WAITING_FOR_APPROVAL
    assert audit.verify().is_intact


def test_with_no_rejection_window_the_call_is_asked_again(alice, agent, api_as, settings):
    conversation = start_conversation(alice, agent, "delete a.txt")
    [first] = pending_approvals(conversation)
    api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "reject"})
    settings.HITL_REPEAT_WINDOW_SECONDS = 0
    assert say(conversation, alice, "delete a.txt").status == Conversation.Status.WAITING_FOR_APPROVAL


def test_the_rejection_window_is_measured_from_the_rejection(alice, agent, api_as, settings, monkeypatch):
    conversation = start_conversation(alice, agent, "delete a.txt")
    [first] = pending_approvals(conversation)
    api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "reject"})
    later = timezone.now() + timedelta(seconds=settings.HITL_REPEAT_WINDOW_SECONDS + 1)
    monkeypatch.setattr("approvals.policy.rules.timezone.now", lambda: later)
    assert say(conversation, alice, "delete a.txt").status == Conversation.Status.WAITING_FOR_APPROVAL


# --- Trust suggestions ------------------------------------------------------------------------------


def test_after_enough_alike_approvals_the_next_card_suggests_an_allow_rule_and_a_rejection_resets(alice, agent, api_as):
    agent.trust_after = 2
    agent.save()
    api = api_as(alice)
    for name in ("a", "b"):
        conversation = start_conversation(alice, agent, f"write hi to notes/{name}.txt")
        [approval] = pending_approvals(conversation)
        assert approval.rule_suggestion["trusted"] == 0
        api.post(f"approvals/{approval.pk}/decision", {"decision": "approve"})
    third = start_conversation(alice, agent, "write hi to notes/c.txt")
    [offered] = pending_approvals(third)
    assert offered.rule_suggestion == {"arguments": {"path": "notes/*"}, "may_allow": True, "trusted": 2}
    assert not Rule.objects.exists()  # a suggestion, never automatic
    page = client_for(alice).get(f"/conversations/{third.pk}/").content.decode()
    assert "You have approved 2 alike" in page and "Approve and always allow these" in page

    api.post(f"approvals/{offered.pk}/decision", {"decision": "reject"})
    fourth = start_conversation(alice, agent, "write hi to notes/d.txt")
    assert pending_approvals(fourth)[0].rule_suggestion["trusted"] == 0  # the rejection reset the count
    # Calls outside the pattern never counted.
    elsewhere = start_conversation(alice, agent, "write hi to other/e.txt")
    assert pending_approvals(elsewhere)[0].rule_suggestion["trusted"] == 0


def test_no_suggestion_for_what_a_rule_may_never_approve(alice, ops_agent):
    ops_agent.trust_after = 1
    ops_agent.save()
    conversation = start_conversation(alice, ops_agent, "delete all files")
    [approval] = pending_approvals(conversation)
    assert approval.rule_suggestion["may_allow"] is False and approval.rule_suggestion["trusted"] == 0


# --- The card's "Always…" form ----------------------------------------------------------------------


def test_the_cards_always_form_saves_its_edited_conditions_with_the_decision(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    client = client_for(alice)
    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "More ways to decide calls like this…" in page and 'name="cond:path" value="notes/*"' in page
    response = client.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "remember_scope": "agent_user", "cond:path": "notes/**", "remember_note": "my notes",
         "shown_hash": approval.shown_hash},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    rule = Rule.objects.get()
    assert (rule.scope, rule.agent, rule.arguments, rule.note) == ("agent_user", agent, {"path": "notes/**"}, "my notes")
    assert f"Saved as rule #{rule.pk}: my notes" in response.content.decode()
    approval.refresh_from_db()
    assert (approval.status, approval.decided_via) == ("approved", "chat")


def test_the_cards_always_form_refuses_a_scope_for_approvers(alice, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    response = client_for(alice).post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "remember_scope": "global"}, headers={"HX-Request": "true"},
    )
    assert response.status_code == 403 and not Rule.objects.exists()
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_someone_no_longer_an_approver_may_switch_their_global_rule_off_but_not_on(bob, api_as):
    made = api_as(bob).post("rules", {"effect": "allow", "tool": "read_file", "scope": "global"}).json()
    bob.user_permissions.clear()
    api = api_as(type(bob).objects.get(pk=bob.pk))
    assert api.patch(f"rules/{made['id']}", {"enabled": False}).status_code == 200
    assert api.patch(f"rules/{made['id']}", {"enabled": True}).status_code == 403
    assert not Rule.objects.get(pk=made["id"]).enabled


def test_an_approver_makes_an_agent_wide_rule_from_the_dashboard(alice, bob, agent):
    conversation = start_conversation(alice, agent, "write hi to notes/a.txt")
    [approval] = pending_approvals(conversation)
    row = client_for(bob).get("/approvals/").content.decode()
    assert "with this agent, in everyone&#x27;s conversations" in row or "with this agent, in everyone's conversations" in row
    response = client_for(bob).post(
        f"/approvals/dashboard/{approval.pk}/decide/",
        {"decision": "approve", "remember_scope": "agent", "cond:path": "notes/*"}, headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    rule = Rule.objects.get()
    assert (rule.scope, rule.agent, rule.created_by, rule.arguments) == ("agent", agent, bob, {"path": "notes/*"})
    approval.refresh_from_db()
    assert (approval.decided_via, approval.decided_by) == ("dashboard", bob)
    # Everyone's conversations with the agent now run such calls unasked.
    assert start_conversation(alice, agent, "write hi to notes/b.txt").status == Conversation.Status.IDLE


# --- Conditions that mean what they say, and who may undo a rule (issue 22) -----------------------------


def test_a_catastrophic_regex_rule_is_matched_in_linear_time(alice, agent, api_as):
    api = api_as(alice)
    made = api.post("rules", {"effect": "allow", "tool": "write_file", "arguments": {"content": {"regex": "(a+)+b"}},
                              "scope": "agent_user", "agent": agent.slug})
    assert made.status_code == 201, made.json()
    assert api.post("conversations", {"agent": agent.slug, "message": "what is 1 + 1"}).status_code == 201  # warm: the first turn imports
    started = time.monotonic()
    sent = api.post("conversations", {"agent": agent.slug, "message": f"write {'a' * 38}c to x.txt"})  # Python's re: ~2**38 steps
    assert sent.status_code == 201, sent.json()
    assert time.monotonic() - started < 1  # the whole turn, loop included (eager Celery)
    conversation = Conversation.objects.get(pk=sent.json()["id"])
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL  # the rule does not match: a human decides
    assert Rule.objects.get().uses == 0


def test_an_allowed_folder_does_not_allow_a_path_that_climbs_out_of_it(alice, agent, api_as, settings):
    made = api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "arguments": {"path": "notes/*"},
                                        "scope": "agent_user", "agent": agent.slug})
    assert made.status_code == 201
    climbed = start_conversation(alice, agent, "write hi to notes/../x.txt")
    assert climbed.status == Conversation.Status.WAITING_FOR_APPROVAL
    assert pending_approvals(climbed)[0].tool_call.arguments == {"path": "notes/../x.txt", "content": "hi"}
    assert not (settings.HITL_SANDBOX_ROOT / str(climbed.pk) / "x.txt").exists()
    assert start_conversation(alice, agent, "write hi to notes/a.txt").status == Conversation.Status.IDLE  # its own files still run


def test_always_allow_on_a_fetch_covers_its_host_and_not_another(alice, agent, api_as):
    conversation = start_conversation(alice, agent, "fetch https://docs.vendor.test")
    [approval] = pending_approvals(conversation)
    assert approval.rule_suggestion["arguments"] == {"url": "https://docs.vendor.test/*"}
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'name="cond:url" value="https://docs.vendor.test/*"' in page
    # Remembered as offered (rejected here, so that nothing is fetched), then made an allow rule.
    decided = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "remember": {"scope": "agent_user"}})
    assert decided.status_code == 200, decided.json()
    assert Rule.objects.get().arguments == {"url": "https://docs.vendor.test/*"}
    Rule.objects.update(effect=Rule.Effect.ALLOW)
    for url in ("https://exfil.attacker.test/?secret=s3cr3t", "https://docs.vendor.test.attacker.test/", "https://docs.vendor.test@attacker.test/"):
        assert start_conversation(alice, agent, f"fetch {url}").status == Conversation.Status.WAITING_FOR_APPROVAL, url
    assert Rule.objects.get().uses == 0


def test_the_cards_always_form_refuses_a_url_condition_that_is_not_a_url(alice, agent):
    conversation = start_conversation(alice, agent, "fetch https://docs.vendor.test")
    [approval] = pending_approvals(conversation)
    response = client_for(alice).post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "remember_scope": "conversation", "cond:url": "https:/*", "shown_hash": approval.shown_hash},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 400 and "https://docs.vendor.test/*" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == "pending" and not Rule.objects.exists()


def test_the_owner_cannot_disable_or_delete_an_approvers_rule_in_their_conversation(alice, bob, agent, api_as):
    conversation = start_conversation(alice, agent, "read x.txt")
    made = api_as(bob).post("rules", {"effect": "deny", "tool": "send_email", "arguments": {"to": "*@competitor.test"},
                                      "scope": "conversation", "conversation_id": str(conversation.pk)})
    assert made.status_code == 201, made.json()
    rule_id = made.json()["id"]
    api = api_as(alice)
    assert [item["id"] for item in api.get("rules").json()["items"]] == [rule_id]  # she sees it

    off = api.patch(f"rules/{rule_id}", {"enabled": False})
    gone = api.delete(f"rules/{rule_id}")

    assert off.status_code == 403 and "approver" in off.json()["detail"]
    assert gone.status_code == 403 and "approver" in gone.json()["detail"]
    rule = Rule.objects.get(pk=rule_id)
    assert rule.enabled and rule.deleted_at is None
    # Its maker may; so may the owner with her own rule in the same conversation.
    assert api_as(bob).patch(f"rules/{rule_id}", {"enabled": False}).status_code == 200
    assert not Rule.objects.get(pk=rule_id).enabled
    own = api.post("rules", {"effect": "allow", "tool": "read_file", "scope": "conversation", "conversation_id": str(conversation.pk)})
    assert api.delete(f"rules/{own.json()['id']}").status_code == 204
