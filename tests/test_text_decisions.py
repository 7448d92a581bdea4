import pytest

from approvals.text import Intent, parse_decision


@pytest.mark.parametrize("text", ["yes", "Yes!", "y", "ok", "approve", "approve all", "yes please", "Go ahead."])
def test_clear_yes_approves(text):
    assert parse_decision(text).intent == Intent.APPROVE


@pytest.mark.parametrize(
    "text,reason",
    [("no", ""), ("No.", ""), ("no because I still need it", "I still need it"), ("reject: Too risky", "Too risky")],
)
def test_clear_no_rejects_with_the_reason_verbatim(text, reason):
    decision = parse_decision(text)
    assert decision.intent == Intent.REJECT and decision.reason == reason


@pytest.mark.parametrize("text", ["yes but not b.txt", "yes, delete only a.txt", "no, just a.txt", "no except b.txt"])
def test_conditional_replies_are_ambiguous(text):
    assert parse_decision(text).intent == Intent.AMBIGUOUS


@pytest.mark.parametrize("text", ["what is 2 + 2", "nothing to add", "yesterday was fine", "list files"])
def test_other_messages_are_not_decisions(text):
    assert parse_decision(text).intent == Intent.NONE
