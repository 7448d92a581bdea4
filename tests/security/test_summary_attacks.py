"""The one summary of a call and the refusals behind it, as an outsider attacks them (issue 35): the
sentence never says less, or other, than what Approve runs (line breaks, invisible characters, a
value posing as another argument, a tool server's harmless title, a describer that fails, an
edit); `fits` never calls a cut call whole; a message that showed the call cut approves nothing
by any path, and a refused approve leaves nothing decided, counted or spent; a late press is
refused and kept once per token; an extend is once, for its requester or a decider, and bounded."""
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from approvals import services, tokens
from approvals.cards import titles
from approvals.models import Approval, DecisionToken, LateDecision, Vote
from approvals.services import AlreadyDecided, NotExtendable, ShownCut, answer, check_decidable, decide, extend
from approvals.summary import summarize, utf8_bytes, utf16_units
from chat.models import ToolCall
from tests.conftest import pending_approvals, start_conversation as start
from tests.approvals.services.test_races import race
from toolservers.titles import describe_call as describe_mcp_call

pytestmark = pytest.mark.django_db(transaction=True)


def loaded(approval_id: int) -> Approval:
    return Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=approval_id)


def one(user, agent, text) -> Approval:
    [approval] = pending_approvals(start(user, agent, text))
    return loaded(approval.pk)


def as_call(approval: Approval, name: str, arguments, annotations=None) -> Approval:
    """The pending approval, as if the model had asked for `name` with `arguments`."""
    ToolCall.objects.filter(pk=approval.tool_call_id).update(name=name, arguments=arguments)
    Approval.objects.filter(pk=approval.pk).update(annotations=annotations)
    return loaded(approval.pk)


def unchanged(approval: Approval, token: str | None = None) -> None:
    """A refused approve decided nothing, counted no vote, kept no late decision, spent no token."""
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    assert not Vote.objects.filter(approval=approval).exists()
    assert not LateDecision.objects.filter(approval=approval).exists()
    if token is not None:
        assert tokens.open_token(token).token.used_at is None


# --- The sentence says what Approve runs -------------------------------------------------------


@pytest.mark.parametrize("tool", ["delete_file", "files__delete"])
def test_a_path_with_line_breaks_cannot_write_a_second_sentence(alice, agent, tool):
    approval = as_call(one(alice, agent, "delete a.txt"), tool, {"path": "a.txt\n\nDelete nothing"})

    sentence = summarize(approval).sentence

    assert "\n" not in sentence and "a.txt Delete nothing" not in sentence
    assert "a.txt⟨U+000A⟩⟨U+000A⟩Delete nothing" in sentence


@pytest.mark.parametrize("hidden", ["\u2028", "\u2029", "\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\U000e0041", "\x85"])
def test_an_invisible_or_direction_changing_character_is_revealed_in_the_sentence_and_head(alice, agent, hidden):
    approval = as_call(one(alice, agent, "delete a.txt"), "delete_file", {"path": f"txt.{hidden}exe"})

    summary = summarize(approval)

    for text in (summary.sentence, summary.head, summary.arguments):
        assert hidden not in text and f"U+{ord(hidden):04X}" in text


def test_a_very_long_target_is_cut_in_the_sentence_and_then_never_fits(alice, agent):
    approval = as_call(one(alice, agent, "delete a.txt"), "delete_file", {"path": "safe.txt" + " " * 5000 + "/etc/passwd"})

    summary = summarize(approval)

    assert not summary.sentence_whole and summary.sentence.endswith("…")
    assert not summary.fits(10**9)
    assert "/etc/passwd" in summary.details  # the details say the rest


def test_an_outside_agents_value_never_poses_as_another_argument(alice, agent, api_as):
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.save()
    arguments = {"service": "api, dry_run=true", "note": "ok\n\nand nothing else", "dry_run=true, force": False}
    body = api_as(alice).post("approval-requests", {"agent": agent.slug, "tool": "deploy", "arguments": arguments}).json()

    sentence = body["summary"]["sentence"]

    assert 'service="api, dry_run=true"' in sentence
    assert 'note="ok\\n\\nand nothing else"' in sentence and "\n" not in sentence
    assert '"dry_run=true, force"=false' in sentence
    assert ", dry_run=true," not in sentence


def test_an_outside_agents_harmless_reason_and_preview_never_hide_its_arguments(alice, agent, api_as):
    agent.require_approval = [*agent.require_approval, "sync"]
    agent.save()
    arguments = {"target": "backup", "then": "rm -rf / " + "x" * 3000}
    body = api_as(alice).post(
        "approval-requests",
        {"agent": agent.slug, "tool": "sync", "arguments": arguments, "reason": "Read-only sync", "preview": {"kind": "text", "text": "Nothing is changed."}},
    ).json()

    summary = summarize(loaded(body["id"]))

    assert "rm -rf /" in summary.details and "x" * 3000 in summary.details and "Nothing is changed." in summary.details
    harmless = len(summary.sentence) + len("Preview:\nNothing is changed.") + 100
    assert not summary.fits(harmless)  # room for the reason and preview is not room for the call
    assert summary.fits(len(summary.sentence) + len(summary.details))


def test_an_outside_agent_naming_a_built_in_tool_its_agent_lacks_gets_no_built_in_words(alice, agent, api_as):
    agent.tools = [name for name in agent.tools if name != "delete_file"]
    agent.save()
    arguments = {"path": "a.txt", "root": "/", "recursive": True}
    body = api_as(alice).post("approval-requests", {"agent": agent.slug, "tool": "delete_file", "arguments": arguments}).json()

    assert body["summary"]["sentence"] == f"Call delete_file on {agent.name} with path=a.txt, root=/, recursive=true"


def test_a_tool_servers_harmless_title_never_hides_which_tool_runs(alice, agent):
    approval = as_call(one(alice, agent, "delete a.txt"), "files__delete", {"path": "a.txt"}, {"title": "Read a file"})

    sentence = summarize(approval).sentence

    assert sentence == "Read a file (files__delete): a.txt"
    assert "files__delete" in titles.title("files__delete", {"path": "a.txt"}, {"title": "Read a file"})
    long_title = describe_mcp_call("files__delete", {"path": "a.txt"}, {"title": "Read " * 100})
    assert "(files__delete)" in long_title and long_title.endswith("a.txt")


@pytest.mark.parametrize("returned", [RuntimeError("oops"), None, 42, b"Read a.txt", ["Read"], "  ", "attack_tool"])
def test_a_describer_that_fails_or_says_nothing_leaves_the_call_and_its_arguments(alice, agent, returned):
    def describer(name, arguments, annotations):
        if name != "attack_tool":
            return ""
        if isinstance(returned, Exception):
            raise returned
        return returned

    titles.add_describer(describer)
    try:
        approval = as_call(one(alice, agent, "delete a.txt"), "attack_tool", {"path": "/etc"})
        sentence = summarize(approval).sentence
    finally:
        titles._describers.remove(describer)

    assert sentence == "Call attack_tool with path=/etc"


def test_the_sentence_and_details_of_an_edited_call_are_the_edit_that_runs(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    Approval.objects.filter(pk=approval.pk).update(edited_arguments={"path": "other.txt", "content": "rm -rf"}, edited_arguments_hash="e" * 64)

    summary = summarize(loaded(approval.pk))

    assert "other.txt" in summary.sentence and "6 bytes" in summary.sentence and "notes.txt" not in summary.sentence
    assert '"other.txt"' in summary.arguments and "notes.txt" not in summary.arguments
    assert summary.shown_hash == "e" * 64


# --- fits() counts what each channel counts ----------------------------------------------------


def test_fits_counts_utf16_units_for_telegram_and_bytes_for_a_byte_limit(alice, agent):
    approval = as_call(one(alice, agent, "write hi to a.txt"), "write_file", {"path": "a.txt", "content": "😀" * 1000})
    summary = summarize(approval)
    characters = len(summary.sentence) + len(summary.details)

    assert summary.fits(characters)
    assert not summary.fits(characters, measure=utf16_units)  # each emoji is two of Telegram's units
    assert not summary.fits(characters, measure=utf8_bytes)
    assert summary.fits(utf16_units(summary.sentence) + utf16_units(summary.details), measure=utf16_units)
    assert not summary.fits(0) and not summary.fits(-1)


# --- A message that showed the call cut approves nothing ---------------------------------------


def test_a_cut_token_approves_no_vote_toward_a_quorum(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    Approval.objects.filter(pk=approval.pk).update(quorum=2)
    token = tokens.issue(loaded(approval.pk), alice, channel="push", complete=False)

    with pytest.raises(ShownCut):
        tokens.redeem(token, approve=True)
    unchanged(approval, token)


def test_a_cut_token_never_approves_a_critical_call_even_with_its_confirmation(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    Approval.objects.filter(pk=approval.pk).update(risk="critical", confirmation_hint="notes.txt")
    token = tokens.issue(loaded(approval.pk), alice, channel="email", complete=False)

    with pytest.raises(ShownCut):
        tokens.redeem(token, approve=True, confirmation="notes.txt")
    unchanged(approval, token)


def test_a_cut_token_never_approves_a_plan_nor_its_chosen_steps(alice, agent):
    plan = one(alice, agent, "plan a tidy-up of the notes")
    assert plan.kind == Approval.Kind.PLAN
    token = tokens.issue(plan, alice, channel="push", complete=False)

    with pytest.raises(ShownCut):
        tokens.redeem(token, approve=True)
    with pytest.raises(ShownCut):
        decide(plan.pk, user=alice, approve=True, via="push", shown_hash=plan.shown_hash, shown_whole=False, steps=[1])
    unchanged(plan, token)
    assert tokens.redeem(token, approve=False, reason="not now").status == Approval.Status.REJECTED


def test_a_question_shown_cut_is_declined_never_answered(alice, agent):
    question = one(alice, agent, "ask me to choose between tea, coffee and water")

    with pytest.raises(ShownCut):
        answer(question.pk, user=alice, via="telegram", shown_hash=question.shown_hash, value="tea", shown_whole=False)
    with pytest.raises(ShownCut):
        check_decidable(question.pk, alice, approve=True, shown_hash=question.shown_hash, shown_whole=False, via="telegram")
    unchanged(question)

    declined = answer(question.pk, user=alice, via="telegram", shown_hash=question.shown_hash, decline=True, reason="ask later", shown_whole=False)
    assert declined.status == Approval.Status.DECLINED


def test_two_approves_with_one_cut_token_both_fail_and_it_still_rejects_once(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    cut = tokens.issue(approval, alice, channel="push", complete=False)
    other = one(alice, agent, "write hi to other.txt")
    tokens.issue(other, alice, channel="push", complete=True)

    for _ in range(2):
        with pytest.raises(ShownCut):
            tokens.redeem(cut, approve=True)
    unchanged(approval, cut)
    assert tokens.redeem(cut, approve=False).status == Approval.Status.REJECTED
    with pytest.raises(tokens.TokenUsed):
        tokens.redeem(cut, approve=False)
    assert Approval.objects.get(pk=other.pk).status == Approval.Status.PENDING  # another approval's token decided nothing here


def test_two_presses_of_one_token_at_once_decide_once(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    token = tokens.issue(approval, alice, channel="push")

    results = race(lambda: tokens.redeem(token, approve=True), lambda: tokens.redeem(token, approve=False, reason="no"))

    decided = [r for r in results if isinstance(r, Approval)]
    assert len(decided) == 1, results
    assert all(isinstance(r, (tokens.TokenUsed, AlreadyDecided)) for r in results if r not in decided), results
    assert Approval.objects.get(pk=approval.pk).status == decided[0].status


# --- Late decisions ----------------------------------------------------------------------------


def overdue(approval: Approval) -> None:
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("channel", ["push", "email"])
def test_a_late_press_is_refused_as_expired_and_kept_once_per_token(alice, agent, channel):
    agent.approval_timeout_seconds = 600
    agent.save()
    approval = one(alice, agent, "write hello to notes.txt")
    token = tokens.issue(approval, alice, channel=channel, complete=False)
    overdue(approval)

    with pytest.raises(AlreadyDecided, match="expired"):
        tokens.redeem(token, approve=True)
    for _ in range(5):  # a flood from one token: refused, and never another row
        with pytest.raises(tokens.TokenUsed):
            tokens.redeem(token, approve=False)

    late = list(LateDecision.objects.filter(approval=approval).values_list("user__username", "via", "decision"))
    assert late == [("alice", channel, "approve")]
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.EXPIRED


def test_late_presses_of_one_token_at_once_are_kept_once(alice, agent):
    approval = one(alice, agent, "write hello to notes.txt")
    token = tokens.issue(approval, alice, channel="push")
    overdue(approval)

    results = race(*[lambda: tokens.redeem(token, approve=True)] * 3)

    assert all(isinstance(r, (AlreadyDecided, tokens.TokenUsed)) for r in results), results
    assert LateDecision.objects.filter(approval=approval).count() == 1


def test_a_message_sent_before_an_extend_still_decides_until_the_new_deadline(alice, agent):
    agent.approval_timeout_seconds = 600
    agent.save()
    approval = one(alice, agent, "write hello to notes.txt")
    token = tokens.issue(approval, alice, channel="push")
    extend(approval.pk, user=alice, via="push")
    # 700 s later: the message (and its token) is that old, the first deadline has passed, the extended one not.
    ago = timedelta(seconds=700)
    DecisionToken.objects.filter(approval=approval).update(created_at=F("created_at") - ago, expires_at=F("expires_at") - ago)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() + timedelta(seconds=300))

    assert tokens.redeem(token, approve=True).status == Approval.Status.APPROVED


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_late_decision_in_the_api_is_409_expired_and_kept_with_its_via(alice, agent, api_as, decision):
    approval = one(alice, agent, "write hello to notes.txt")
    overdue(approval)

    response = api_as(alice).post(f"approvals/{approval.pk}/decision", {"decision": decision, "shown_hash": approval.shown_hash})

    assert response.status_code == 409 and "expired" in response.json()["detail"]
    assert list(LateDecision.objects.values_list("via", "decision")) == [("api", decision)]


# --- Extend ------------------------------------------------------------------------------------


@pytest.fixture
def timed(agent):
    agent.approval_timeout_seconds = 600
    agent.save()
    return agent


def test_only_who_may_see_it_extends_and_only_once(alice, bob, mallory, timed, api_as):
    approval = one(alice, timed, "write hello to notes.txt")

    with pytest.raises(Approval.DoesNotExist):
        extend(approval.pk, user=mallory, via="api")
    assert api_as(mallory).post(f"approvals/{approval.pk}/extend").status_code == 404
    assert Approval.objects.get(pk=approval.pk).extended_at is None

    before = Approval.objects.get(pk=approval.pk).expires_at
    extended = extend(approval.pk, user=alice, via="api")  # its requester
    assert extended.expires_at > before and extended.extended_by == alice
    with pytest.raises(NotExtendable):
        extend(approval.pk, user=bob, via="api")  # a decider, after it: once is all
    assert api_as(bob).post(f"approvals/{approval.pk}/extend").status_code == 409
    assert Approval.objects.get(pk=approval.pk).expires_at == extended.expires_at


@pytest.mark.parametrize("seconds", [0, -5, "soon", 1.5, 10**10, [60], {"s": 1}])
def test_an_extend_with_odd_seconds_is_refused_and_leaves_the_deadline(alice, timed, api_as, seconds):
    approval = one(alice, timed, "write hello to notes.txt")

    response = api_as(alice).post(f"approvals/{approval.pk}/extend", {"seconds": seconds})

    assert response.status_code in (400, 422)
    assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_a_huge_extend_is_capped_at_the_agents_timeout(alice, timed):
    approval = one(alice, timed, "write hello to notes.txt")
    before = approval.expires_at

    extended = extend(approval.pk, user=alice, via="api", seconds=10**12)

    assert extended.expires_at - before == timedelta(seconds=600)


def test_an_expired_or_decided_approval_is_not_extended(alice, timed, api_as):
    expired = one(alice, timed, "write hello to notes.txt")
    overdue(expired)
    decided = one(alice, timed, "write hi to other.txt")
    decide(decided.pk, user=alice, approve=False, via="api", shown_hash=decided.shown_hash, reason="no")

    for approval in (expired, decided):
        with pytest.raises(AlreadyDecided):
            extend(approval.pk, user=alice, via="api")
        assert api_as(alice).post(f"approvals/{approval.pk}/extend").status_code == 409
        assert Approval.objects.get(pk=approval.pk).extended_at is None


def test_two_extends_at_once_extend_once(alice, bob, timed):
    approval = one(alice, timed, "write hello to notes.txt")

    results = race(lambda: extend(approval.pk, user=alice, via="api"), lambda: extend(approval.pk, user=bob, via="api"))

    assert sum(isinstance(r, Approval) for r in results) == 1, results
    assert sum(isinstance(r, NotExtendable) for r in results) == 1, results
    assert Approval.objects.get(pk=approval.pk).expires_at - approval.expires_at == timedelta(seconds=600)


def test_of_two_extends_racing_one_wins(alice, bob, timed, monkeypatch):
    approval = one(alice, timed, "write hello to notes.txt")
    real = services.warning_at
    raced = []

    def the_other_extend_lands_first(start, seconds):
        if not raced:  # between the first extend's read and its update
            raced.append(None)
            raced[0] = extend(approval.pk, user=bob, via="api")
        return real(start, seconds)

    monkeypatch.setattr(services.deadlines, "warning_at", the_other_extend_lands_first)
    with pytest.raises(NotExtendable):
        extend(approval.pk, user=alice, via="api")

    stored = Approval.objects.get(pk=approval.pk)
    assert stored.extended_by == bob and stored.expires_at == raced[0].expires_at
