"""Slack end to end: a stack of its own (redis-server, daphne, beat and a Celery worker) pointed
at a local stand-in for the Slack Web API (tests/standins/fake_slack.py) through SLACK_API_BASE_URL. A test
plays Slack: it sends `/hitl link <code>`, presses buttons and submits modals, signed and posted
to daphne as Slack posts them, and reads what the app sent to the stand-in."""
import io
import json
import re
import time
from urllib.parse import urlencode

import pytest
from django.core.management import call_command

from approvals.models import Approval
from chat.models import Agent, Message
from slacklink.models import Reminder, SlackAccount, SlackMessage
from tests.conftest import wait_until
from tests.e2e.channels.conftest import ChannelStack, after_the_test, approval_of, start_on, start_parts, wait_for_parts
from tests.e2e.conftest import Api, free_port, status_of
from tests.standins.fake_slack import TEAM, FakeSlack, http_poster, sign

pytestmark = pytest.mark.e2e

ALICE, BOB, CAROL, MALLORY = "UALICE", "UBOB", "UCAROL", "UMALLORY"


class SlackStack(ChannelStack):
    def __init__(self, base_url, fake, processes):
        self.base_url, self.fake, self.processes = base_url, fake, processes


@pytest.fixture(scope="module")
def slack_stack(stack, tmp_path_factory):
    work = tmp_path_factory.mktemp("slack")
    redis_port, web_port = free_port(), free_port()
    base_url = f"http://127.0.0.1:{web_port}"
    with FakeSlack(poster=http_poster(base_url)) as fake:
        env = stack.env | {
            "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "SLACK_BOT_TOKEN": fake.token,
            "SLACK_SIGNING_SECRET": fake.signing_secret,
            "SLACK_API_BASE_URL": fake.url,
            "HITL_DELIVERY_SWEEP_SECONDS": "1",
            "HITL_SLACK_STALE_SECONDS": "2",
            "HITL_SLACK_RETRIES": "2",
            "HITL_BASE_URL": base_url,
        }
        processes = {}
        start_parts(processes, "slack", env, work, redis_port, web_port)
        slack = SlackStack(base_url, fake, processes)
        try:
            wait_for_parts(processes, web_port)
            yield slack
        finally:
            for process in processes.values():
                process.stop()


@pytest.fixture
def sl(slack_stack, transactional_db):
    slack_stack.fake.calls.clear()
    slack_stack.fake.failing = set()
    yield slack_stack
    after_the_test(slack_stack)


def link(sl, user, slack_id: str) -> SlackAccount:
    out = io.StringIO()
    call_command("slack_link_code", user.username, stdout=out)
    status, body = sl.fake.command(slack_id, f"link {out.getvalue().split()[-1]}")
    assert status == 200 and json.loads(body)["text"].startswith(f"Linked to {user.username}."), body
    return SlackAccount.objects.get(user=user, slack_user_id=slack_id)


def request_to(sl, slack_id: str, conversation_id: str, *, containing: str = "") -> dict:
    """The message showing that conversation's approval in `slack_id`'s messages, as it is now."""
    approval = approval_of(conversation_id)

    def shown():
        return next((m for m in sl.fake.messages_to(slack_id) if shows(sl, m, approval) and containing in sl.fake.text_of(m)), None)

    return wait_until(shown, timeout=20, message=f"the request in Slack {containing!r}\n{sl.logs()}")


def reply_under(sl, slack_id: str, message: dict, approval: Approval, *, timeout: float = 30) -> dict:
    """The first reply in `message`'s thread; past the timeout, a failure that says what the
    approval's warning and the outbox held, and what each process logged."""
    def reply():
        return next((r for r in sl.fake.replies_to(slack_id) if r["thread_ts"] == message["ts"]), None)

    try:
        return wait_until(reply, timeout=timeout, message="a reply")
    except AssertionError:
        approval.refresh_from_db()
        held = list(Reminder.objects.filter(message__approval=approval).values("kind", "status", "attempts", "last_error"))
        raise AssertionError(f"no reply under #{approval.pk} (warn_at {approval.warn_at}, warned_at {approval.warned_at}, "
                             f"expires_at {approval.expires_at}); its replies: {held}\n{sl.logs()}") from None


def shows(sl, message: dict, approval: Approval) -> bool:
    return re.search(rf"Request #{approval.pk}\b", sl.fake.text_of(message)) is not None


def copies_of(sl, slack_id: str, approval: Approval) -> list[dict]:
    return [m for m in sl.fake.messages_to(slack_id) if shows(sl, m, approval)]


def test_linking_then_approving_with_a_press_resumes_the_run_and_updates_the_message(sl, alice, agent):
    link(sl, alice, ALICE)
    conversation_id = start_on(sl, alice, "write hello to a.txt")
    message = request_to(sl, ALICE, conversation_id)
    assert sl.fake.text_of(message).startswith("Approve? Write a.txt") and "asked by alice (Demo agent)" in sl.fake.text_of(message)
    assert list(sl.fake.buttons(message)) == ["Approve", "Reject", "Open on the site"]
    assert all("a.txt" not in button.get("value", "") for button in sl.fake.buttons(message).values())

    assert sl.fake.press(ALICE, message, "Approve") == (200, "")

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval = Approval.objects.get(conversation_id=conversation_id)
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "slack", alice)
    updated = request_to(sl, ALICE, conversation_id, containing=f"Approved by alice via slack at {approval.decided_at:%H:%M}")
    assert updated["ts"] == message["ts"] and sl.fake.buttons(updated) == {}


def test_reject_with_a_reason_in_a_modal_is_quoted_by_the_model(sl, alice, agent):
    link(sl, alice, ALICE)
    conversation_id = start_on(sl, alice, "email bob@example.com about the merger")
    sl.fake.press(ALICE, request_to(sl, ALICE, conversation_id), "Reject")
    (view,) = sl.fake.views()  # Reject asks why

    assert sl.fake.submit(ALICE, view, {"reason": "Legal has not signed off"}) == (200, "")

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    reply = Message.objects.filter(conversation_id=conversation_id, role="assistant").last().content
    assert reply == "I did not email bob@example.com about the merger (Rejected by alice: Legal has not signed off)."
    request_to(sl, ALICE, conversation_id, containing="Rejected by alice via slack")


def test_a_press_after_an_api_decision_is_told_too_late_and_changes_nothing(sl, alice, agent):
    link(sl, alice, ALICE)
    conversation_id = start_on(sl, alice, "write hello to a.txt")
    message = request_to(sl, ALICE, conversation_id)
    approval = Approval.objects.get(conversation_id=conversation_id)
    decided = Api(sl.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "not now"})
    assert decided.status_code == 200
    request_to(sl, ALICE, conversation_id, containing="Rejected by alice via api")

    sl.fake.press(ALICE, message, "Approve")

    assert sl.fake.ephemerals(ALICE)[-1].startswith("too late: rejected by alice via api")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


def test_forged_replayed_and_foreign_presses_decide_nothing(sl, alice, mallory, agent):
    link(sl, alice, ALICE)
    link(sl, mallory, MALLORY)
    conversation_id = start_on(sl, alice, "write hello to a.txt")
    message = request_to(sl, ALICE, conversation_id)
    token = sl.fake.buttons(message)["Approve"]["value"]
    payload = {"type": "block_actions", "team": {"id": TEAM}, "user": {"id": ALICE, "team_id": TEAM},
               "actions": [{"action_id": "approve", "value": token}], "channel": {"id": message["channel"]}}
    body = urlencode({"payload": json.dumps(payload)})

    assert sl.fake.deliver("/slack/interactions/", body, headers=sign("guessed-secret", body))[0] == 401
    assert sl.fake.deliver("/slack/interactions/", body, headers=sign(sl.fake.signing_secret, body, int(time.time()) - 600))[0] == 401
    sl.fake.press(MALLORY, message, "Approve")  # mallory, linked, presses alice's button
    assert sl.fake.ephemerals(MALLORY)[-1] == "This request is no longer known."
    assert Approval.objects.get(conversation_id=conversation_id).status == "pending"

    headers = sign(sl.fake.signing_secret, body)
    assert sl.fake.deliver("/slack/interactions/", body, headers=headers)[0] == 200  # alice's own press
    assert sl.fake.deliver("/slack/interactions/", body, headers=headers)[0] == 409  # the same, replayed
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    assert Approval.objects.get(conversation_id=conversation_id).decided_by == alice


def test_four_eyes_reaches_only_approvers_an_edit_rewrites_their_copies_and_old_buttons_decide_nothing(sl, alice, bob, carol, ops_agent, agent):
    link(sl, alice, ALICE)
    link(sl, bob, BOB)
    link(sl, carol, CAROL)
    conversation_id = start_on(sl, alice, "delete a.txt", agent="ops")
    before = request_to(sl, CAROL, conversation_id)
    request_to(sl, BOB, conversation_id)
    approval = Approval.objects.get(conversation_id=conversation_id)
    assert approval.approver_required and not copies_of(sl, ALICE, approval)

    edited = Api(sl.base_url, bob).post(f"approvals/{approval.pk}/decision",
                                       {"decision": "approve", "arguments": {"path": "b.txt"}, "shown_hash": approval.shown_hash})
    assert edited.status_code == 200 and edited.json()["status"] == "pending", edited.text
    after = request_to(sl, CAROL, conversation_id, containing="b.txt")
    assert after["ts"] == before["ts"]

    sl.fake.press(CAROL, before, "Approve")
    assert sl.fake.ephemerals(CAROL)[-1].startswith("The call was edited after this message")
    sl.fake.press(CAROL, after, "Approve")

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the four-eyes run")
    approval.refresh_from_db()
    assert (approval.decided_by, approval.approved_arguments) == (carol, {"path": "b.txt"})
    request_to(sl, BOB, conversation_id, containing="Approved by carol via slack")


def test_a_critical_call_is_approved_only_with_the_confirmation_typed_in_the_modal(sl, alice, agent):
    link(sl, alice, ALICE)
    conversation_id = start_on(sl, alice, "delete all files")
    sl.fake.press(ALICE, request_to(sl, ALICE, conversation_id), "Approve (type the confirmation)")
    view = sl.fake.views()[-1]
    assert Approval.objects.get(conversation_id=conversation_id).status == "pending"

    status, body = sl.fake.submit(ALICE, view, {"confirmation": "delete"})
    assert status == 200 and "That is not it" in json.loads(body)["errors"]["confirmation"]
    assert sl.fake.submit(ALICE, view, {"confirmation": "DELETE"}) == (200, "")

    wait_until(lambda: Approval.objects.get(conversation_id=conversation_id).status == "approved", timeout=20, message="the approval")
    request_to(sl, ALICE, conversation_id, containing="Approved by alice via slack")


def test_slack_down_then_back_loses_nothing_and_sends_nothing_twice(sl, alice, agent):
    link(sl, alice, ALICE)
    sl.fake.failing = {"chat.postMessage", "chat.update"}
    conversation_id = start_on(sl, alice, "write hello to a.txt")
    approval = approval_of(conversation_id)
    wait_until(lambda: SlackMessage.objects.filter(approval=approval, attempts__gte=1).exclude(last_error="").exists(),
               timeout=20, message="a failed send")
    assert status_of(conversation_id) == "waiting_for_approval"  # the loop never waits for Slack

    sl.fake.failing = set()
    message = request_to(sl, ALICE, conversation_id)
    sl.fake.failing = {"chat.update"}
    assert Api(sl.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve"}).status_code == 200
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on while Slack is down")
    sl.fake.failing = set()

    request_to(sl, ALICE, conversation_id, containing="Approved by alice via api")
    assert len([b for b in sl.fake.sent("chat.postMessage", channel=ALICE) if f"Request #{approval.pk}\"" in json.dumps(b["blocks"])]) == 1
    assert len(copies_of(sl, ALICE, approval)) == 1 and message["ts"] == copies_of(sl, ALICE, approval)[0]["ts"]
    # The close marks its row once Slack answered the update: a moment after the fake showed it (the
    # cause of this test's rare failure, asserting in between).
    wait_until(lambda: SlackMessage.objects.get(approval=approval).status == "closed", timeout=10,
               message=f"the copy's row closed once its update went through\n{sl.logs()}")


def test_a_question_gets_a_button_per_option_and_a_press_answers_it(sl, alice, agent):
    link(sl, alice, ALICE)
    conversation_id = start_on(sl, alice, "ask me to choose between tea, coffee and water")
    message = request_to(sl, ALICE, conversation_id)
    assert {"tea", "coffee", "water"} <= set(sl.fake.buttons(message))

    sl.fake.press(ALICE, message, "coffee")

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    assert Message.objects.filter(conversation_id=conversation_id, role="assistant").last().content == "You answered: coffee."
    request_to(sl, ALICE, conversation_id, containing="Answered by alice via slack")


def test_a_cut_call_is_refused_from_slack_and_approved_on_the_site_and_a_warned_one_is_extended_from_its_warning(sl, alice, agent):
    link(sl, alice, ALICE)
    content = "y" * 13000
    cut_id = start_on(sl, alice, f"call write_file with {json.dumps({'path': 'setup.sh', 'content': content})}")
    cut = request_to(sl, ALICE, cut_id, containing="Cut: the call is too long for Slack")
    assert list(sl.fake.buttons(cut)) == ["Reject", "Open on the site"]
    token = sl.fake.buttons(cut)["Reject"]["value"]

    forged = {"type": "button", "action_id": "approve", "block_id": "decide", "value": token}  # signed, as alice
    assert sl.fake.act(ALICE, cut, forged) == (200, "")

    assert sl.fake.ephemerals(ALICE)[-1].startswith("This message showed the call cut: open it on the site to approve")
    approval = Approval.objects.get(conversation_id=cut_id)
    assert approval.status == "pending"
    site = Api(sl.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash})
    assert site.status_code == 200, site.text
    wait_until(lambda: status_of(cut_id) == "idle", timeout=20, message="the run to go on")
    request_to(sl, ALICE, cut_id, containing="Approved by alice via api")

    # A wait shorter than a minute is warned of at once: beat's sweep warns, the worker replies.
    Agent.objects.filter(pk=agent.pk).update(approval_timeout_seconds=55)
    warned_id = start_on(sl, alice, "write hello to b.txt")
    message = request_to(sl, ALICE, warned_id)
    warning = reply_under(sl, ALICE, message, Approval.objects.get(conversation_id=warned_id))
    assert warning["thread_ts"] == message["ts"] and sl.fake.text_of(warning).startswith("Expires at ")
    before = Approval.objects.get(conversation_id=warned_id).expires_at

    sl.fake.press(ALICE, warning, "Extend")

    extended = Approval.objects.get(conversation_id=warned_id)
    assert extended.expires_at > before and extended.extended_by == alice
    assert sl.fake.ephemerals(ALICE)[-1].startswith(f"Extended: #{extended.pk} now expires at")
    shown = request_to(sl, ALICE, warned_id, containing="extended by alice")
    assert f"Expires at {extended.expires_at:%Y-%m-%d %H:%M} UTC" in sl.fake.text_of(shown)
    sl.fake.press(ALICE, shown, "Approve")
    wait_until(lambda: status_of(warned_id) == "idle", timeout=20, message="the run to go on")
    assert Approval.objects.get(pk=extended.pk).decided_via == "slack"


def test_a_direct_message_starts_a_conversation_its_call_is_pressed_and_the_answer_is_posted_back(sl, alice, agent):
    """Issue 39, item 4: the chat the prompt came from, through the Events API, daphne and a worker."""
    from slacklink.models import SlackChat
    from tests.standins.fake_slack import dm

    link(sl, alice, ALICE)

    assert sl.fake.message(ALICE, "write hello to chat.txt") == (200, "")

    chat = wait_until(lambda: SlackChat.objects.filter(account__user=alice, conversation__isnull=False).first(), message="the conversation")
    conversation_id = str(chat.conversation_id)
    message = request_to(sl, ALICE, conversation_id)
    assert sl.fake.press(ALICE, message, "Approve") == (200, "")

    said = wait_until(lambda: next((b for b in sl.fake.said_in(dm(ALICE)) if b["text"].startswith("🤖")), None),
                      timeout=30, message=f"the answer in the messages\n{sl.logs()}")
    assert said["text"] == "🤖 I did write chat.txt: Wrote 5 bytes to chat.txt."
    assert status_of(conversation_id) == "idle"
