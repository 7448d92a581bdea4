import pytest

from approvals.text import Intent, TextDecision, parse_decision


@pytest.mark.parametrize(
    "text",
    [
        "yes", "Yes!", "  YES  ", "y", "ok", "approve", "yes please", "yes please do", "Go ahead.",
        "yes, go ahead, thanks", "“yes”",
    ],
)
def test_plain_yes_approves_without_a_count(text):
    assert parse_decision(text) == TextDecision(Intent.APPROVE)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("no", ""),
        ("No.", ""),
        ("nope", ""),
        ("no thanks", ""),
        ("no, because it is risky", "it is risky"),
        ("no because I still need it", "I still need it"),
        ("no, because not today", "not today"),
        ("reject: Too risky", "Too risky"),
        ("no, reason: too risky", "too risky"),
        ("cancel", ""),  # kagent's word for it
        ("Cancel: not now", "not now"),
    ],
)
def test_plain_no_rejects_without_a_count(text, reason):
    assert parse_decision(text) == TextDecision(Intent.REJECT, reason)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("approve all 3", TextDecision(Intent.APPROVE, count=3)),
        ("approve all 3 please", TextDecision(Intent.APPROVE, count=3)),
        ("Approve all 3.", TextDecision(Intent.APPROVE, count=3)),
        ("  APPROVE   All\n3 ", TextDecision(Intent.APPROVE, count=3)),
        ("please approve all 3 of them", TextDecision(Intent.APPROVE, count=3)),
        ("yes to all 3", TextDecision(Intent.APPROVE, count=3)),
        ("approve both", TextDecision(Intent.APPROVE, count=2)),
        ("reject all 2 because I need them", TextDecision(Intent.REJECT, "I need them", 2)),
        ("reject all 2: too risky", TextDecision(Intent.REJECT, "too risky", 2)),
        ("no to all 2", TextDecision(Intent.REJECT, count=2)),
    ],
)
def test_stated_count_is_reported(text, expected):
    assert parse_decision(text) == expected


@pytest.mark.parametrize(
    "text,count", [("approve all three", 3), ("reject all TWO", 2), ("yes to all ten", 10), ("approve all one", 1)]
)
def test_count_written_as_a_word_is_reported_as_a_number(text, count):
    assert parse_decision(text).count == count


@pytest.mark.parametrize(
    "text,count", [("approve all 0", 0), ("approve all 1000000", 1_000_000), ("reject all 007", 7)]
)
def test_count_is_reported_as_given_for_the_caller_to_compare(text, count):
    assert parse_decision(text).count == count


def test_count_too_long_to_read_decides_nothing():
    assert parse_decision("approve all " + "9" * 5000).intent == Intent.AMBIGUOUS


@pytest.mark.parametrize(
    "text,intent", [("approve all", Intent.APPROVE), ("yes to all", Intent.APPROVE), ("reject all", Intent.REJECT)]
)
def test_all_without_a_number_states_no_count(text, intent):
    assert parse_decision(text) == TextDecision(intent)


@pytest.mark.parametrize(
    "text,reason",
    [
        ("reject all 2 because Keep A.txt!", "Keep A.txt!"),
        ("no because I still need it", "I still need it"),
        ("reject: Too risky", "Too risky"),
        ("reject all two because x:  Y", "x: Y"),
        ("reject all 2, reason being they're MINE", "they're MINE"),
        ("approve all 3: Looks fine.", "Looks fine."),
    ],
)
def test_reason_is_kept_verbatim(text, reason):
    assert parse_decision(text).reason == reason


@pytest.mark.parametrize(
    "text",
    [
        "no problem",
        "no, go ahead",
        "nah, do it",
        "no worries",
        "no, that's fine",
        "no, please do",
        "not at all, go ahead",
        "No Problem!",
        "no, proceed",
        "no: go ahead",
        "no because that’s fine",
        "no reason to wait, do it",
        "no reason not to",
    ],
)
def test_affirmative_no_phrases_are_not_rejections(text):
    assert parse_decision(text).intent == Intent.AMBIGUOUS


@pytest.mark.parametrize(
    "text",
    [
        "yes but not b.txt",
        "yes, delete only a.txt",
        "no, just a.txt",
        "no: just a.txt",
        "no except b.txt",
        "approve all 3 but not b.txt",
        "approve all 3 because it's only temp files, not b.txt",
        "no, as long as you keep a.txt",
        "ok, reject all 2",
        "yes?",
    ],
)
def test_conditional_replies_are_ambiguous(text):
    assert parse_decision(text).intent == Intent.AMBIGUOUS


def test_choosing_one_call_by_words_is_ambiguous():
    # Ambiguous rather than none: it is an answer, so the caller explains how to decide a call.
    assert parse_decision("approve the first one").intent == Intent.AMBIGUOUS


@pytest.mark.parametrize(
    "text", ["what is 2 + 2", "nothing to add", "yesterday was fine", "list files", "because yes", "don't"]
)
def test_other_messages_are_not_decisions(text):
    assert parse_decision(text) == TextDecision(Intent.NONE)
