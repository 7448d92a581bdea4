"""Updates the bot cannot read or act on: malformed updates are dropped without an error, a group
chat links nothing, and a press that is unknown, from someone not linked, of a button the request
does not have, or by someone who may not decide is answered and decides nothing."""
import pytest
from django.contrib.auth.models import User

from approvals.models import Approval
from telegramlink import accounts, updates
from telegramlink.models import LinkCode, TelegramAccount
from tests.telegramlink.phone import (
    ALICE_TG,
    MALLORY_TG,
    STRANGER_TG,
    link,
    message_update,
    press,
    press_update,
    replies,
    say,
    through_the_loop,
)

pytestmark = pytest.mark.django_db


MALFORMED_UPDATES = [
    {},
    {"update_id": 1},
    {"message": None},
    {"message": "hello"},
    {"message": {}},
    {"message": {"text": "/start X", "chat": {"id": 5, "type": "private"}}},  # no sender
    {"message": {"text": "/start X", "from": {"id": "5"}, "chat": {"id": 5, "type": "private"}}},  # id as a string
    {"message": {"text": 12, "from": {"id": 5}, "chat": {"id": 5, "type": "private"}}},
    {"message": {"text": "/start X", "from": "someone", "chat": {"id": 5, "type": "private"}}},
    {"message": {"text": "/start X", "from": {"id": 5}, "chat": ["not", "a", "chat"]}},
    {"message": {"photo": [{"file_id": "x"}], "from": {"id": 5}, "chat": {"id": 5, "type": "private"}}},  # no text
    {"callback_query": None},
    {"callback_query": []},
    {"callback_query": {}},  # no id: nothing to answer
    {"edited_message": {"text": "/stop", "from": {"id": 5}, "chat": {"id": 5, "type": "private"}}},
    {"my_chat_member": {"chat": {"id": 5}}},
]


def test_an_update_the_bot_cannot_read_is_dropped_without_an_error(fake, alice):
    for update in MALFORMED_UPDATES:
        updates.handle(update)  # never raises

    assert not TelegramAccount.objects.exists()
    assert not fake.sent("answerCallbackQuery")


def test_a_group_chat_links_nothing_and_is_told_the_bot_works_only_in_private(fake, alice):
    code = accounts.issue_code(alice)

    updates.handle(message_update(ALICE_TG, f"/start {code}", chat_type="group", chat_id=-500))

    assert not TelegramAccount.objects.exists()
    assert replies(fake, -500) == ["I only work in a private chat."]
    assert LinkCode.objects.get(user=alice).used_at is None  # the code still works in private
    say(ALICE_TG, f"/start {code}")
    assert TelegramAccount.objects.filter(user=alice).exists()


def test_a_press_with_unknown_callback_data_is_answered_that_the_request_is_unknown(fake, alice):
    link(alice, ALICE_TG)
    for number, data in enumerate([None, "", "garbage", "a:unknown-token", ":", "a:", "x" * 500, 12345, {"a": 1}]):
        assert press(fake, ALICE_TG, data, query_id=f"q{number}") == "This request is no longer known.", data


def test_a_press_from_a_sender_who_is_not_linked_is_answered_not_linked(fake, alice):
    link(alice, ALICE_TG)
    for number, sender in enumerate([None, {}, {"id": "1001"}, {"id": STRANGER_TG}, {"id": None}, {"id": 1.5}]):
        update = press_update(ALICE_TG, "a:some-token", query_id=f"q{number}")
        update["callback_query"]["from"] = sender
        updates.handle(update)
        assert "not linked" in fake.answer_to(f"q{number}"), sender


@pytest.mark.parametrize("sender", ["alice", ["alice"], 1001])
def test_a_press_whose_sender_is_not_an_object_is_still_answered(fake, alice, sender):
    """The callback query is always answered, even when handling it fails: the button stops spinning."""
    link(alice, ALICE_TG)
    update = press_update(ALICE_TG, "a:some-token")
    update["callback_query"]["from"] = sender

    updates.handle(update)  # never raises

    assert fake.answer_to("q1") == "That press could not be handled: look at the request on the site."


@through_the_loop
def test_a_press_of_a_button_the_request_does_not_have_is_answered_and_decides_nothing(pending, fake):
    approval, buttons = pending
    token = buttons["Approve"].split(":", 1)[1]

    for number, action in enumerate(["z", "o0", "o", "o-1", "A", "aa", ""]):
        assert press(fake, ALICE_TG, f"{action}:{token}", query_id=f"q{number}") == "That button is not one of this request's."

    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_press_by_someone_who_may_not_decide_or_is_inactive_is_refused(pending, fake, alice, mallory):
    approval, buttons = pending
    link(mallory, MALLORY_TG)

    assert press(fake, MALLORY_TG, buttons["Approve"]) == "You may not decide this request."
    assert press(fake, MALLORY_TG, buttons["Reject"], query_id="q2") == "You may not decide this request."
    User.objects.filter(pk=alice.pk).update(is_active=False)
    assert "not linked" in press(fake, ALICE_TG, buttons["Approve"], query_id="q3")

    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_message_without_a_pending_prompt_is_told_to_use_the_buttons(pending, fake):
    say(ALICE_TG, "approve it please")

    assert replies(fake, ALICE_TG)[-1].startswith("Decide with the buttons")
    assert Approval.objects.get(pk=pending[0].pk).status == "pending"
