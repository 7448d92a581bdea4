"""What a Slack request shows, and only what was shown whole is approved (issue 35): the summary
sentence and who asked, arguments shown literally, a call too long cut with a link and only rejected
there (a forged approve refused), a sentence-only risk, a plan, a kind or question Slack cannot show
sent generic, details split in pieces Slack takes."""
import json

import pytest

from approvals import services as approval_services
from approvals.models import Approval
from approvals.summary import summarize
from deliveries import outbox
from slacklink import blocks
from slacklink.models import SentVersion, SlackMessage
from tests.conftest import only_pending, start_conversation
from tests.slacklink.workspace import ALICE, link, queued_unsent, request_to, send, through_the_loop

pytestmark = pytest.mark.django_db


@through_the_loop
def test_a_request_reads_as_the_summary_sentence_and_who_asked_then_why_and_the_whole_details(pending, fake):
    approval, message = pending
    summary = summarize(Approval.objects.get(pk=approval.pk))
    text = fake.text_of(message)
    assert text.startswith("Approve? Write a.txt") and "— asked by alice (Demo agent)" in text.splitlines()[0]
    assert summary.head in text and f"Why: {summary.why}" in text and summary.why != "write_file"
    assert f"Risk: {approval.risk}" in text and summary.arguments in text and "Cut" not in text
    assert list(fake.buttons(message)) == ["Approve", "Reject", "Open on the site"]
    assert fake.buttons(message)["Open on the site"]["url"].endswith(f"#tool-call-{approval.tool_call_id}")
    (post,) = fake.sent("chat.postMessage", channel=ALICE)
    assert post["text"] == summary.head  # the notification a person reads in one second
    values = {b["value"] for label, b in fake.buttons(message).items() if label != "Open on the site"}
    (version,) = SentVersion.objects.filter(message__approval=approval)
    assert values == {version.token} and "a.txt" not in version.token and version.complete


@through_the_loop
def test_markup_mentions_and_invisible_characters_in_arguments_are_shown_literally(fake, alice, agent):
    link(fake, alice, ALICE)
    content = "<!channel> *bold* <https://evil.test|click> \u202egnp.exe & done"
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'x.txt', 'content': content})}"))
    message = request_to(fake, ALICE, approval)
    detail = next(b for b in message["blocks"] if b["type"] == "rich_text")
    shown = detail["elements"][0]["elements"][0]["text"]
    assert "⟨U+202E⟩" in shown and "\u202e" not in json.dumps(message, ensure_ascii=False)
    assert "<!channel>" in shown  # literal: preformatted rich text neither mentions nor links
    assert all(b["type"] != "section" or b.get("text", {"type": "plain_text"})["type"] == "plain_text" for b in message["blocks"])
    (post,) = fake.sent("chat.postMessage", channel=ALICE)
    assert "<" not in post["text"] and ">" not in post["text"]


@through_the_loop
def test_a_call_too_long_for_slack_is_cut_with_a_link_and_can_only_be_rejected_there(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'x.txt', 'content': 'y' * 9000})}"))
    message = request_to(fake, ALICE, approval)
    assert message is not None  # the stand-in refuses a block past 3,000 characters, as Slack does
    assert blocks.CUT in fake.text_of(message) and "Cut: the call is too long for Slack" in fake.text_of(message)
    assert list(fake.buttons(message)) == ["Reject", "Open on the site"]
    assert not SentVersion.objects.get(message__approval=approval).complete


@through_the_loop
def test_a_call_decided_at_once_by_a_rule_is_not_sent(fake, alice, agent, api_as):
    link(fake, alice, ALICE)
    response = api_as(alice).post("rules", {"effect": "allow", "tool": "write_file", "scope": "agent_user", "agent": agent.slug})
    assert response.status_code in (200, 201), response.content
    start_conversation(alice, agent, "write hello to a.txt")
    assert not SlackMessage.objects.exists()


def forge(fake, slack_id: str, message: dict, action_id: str, value: str) -> tuple[int, str]:
    """A press of a button the message does not have, correctly signed: what an attacker who read the message sends."""
    return fake.act(slack_id, message, {"type": "button", "action_id": action_id, "block_id": "decide", "value": value})


def long_write(user, agent) -> Approval:
    return only_pending(start_conversation(user, agent, f"call write_file with {json.dumps({'path': 'setup.sh', 'content': 'y' * 13000})}"))


@through_the_loop
def test_a_forged_signed_approve_press_on_a_cut_message_is_refused_and_decides_nothing(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = long_write(alice, agent)
    message = request_to(fake, ALICE, approval)
    token = fake.buttons(message)["Reject"]["value"]
    assert "Approve" not in fake.buttons(message)

    assert forge(fake, ALICE, message, blocks.APPROVE, token)[0] == 200

    assert fake.ephemerals(ALICE)[-1].startswith("This message showed the call cut: open it on the site to approve:")
    assert blocks.conversation_url(approval) in fake.ephemerals(ALICE)[-1]
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by) == ("pending", None)
    assert SlackMessage.objects.get(approval=approval).status == "sent" and fake.buttons(request_to(fake, ALICE, approval))
    approval_services.decide(approval.pk, user=alice, approve=True, via="chat", shown_hash=approval.shown_hash)  # the site, whole
    assert Approval.objects.get(pk=approval.pk).status == "approved"


@through_the_loop
def test_a_forged_confirmation_of_a_cut_critical_call_is_refused_in_the_press_and_in_the_modal(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = ["critical"]
    approval = only_pending(start_conversation(alice, agent, "delete all files"))
    message = request_to(fake, ALICE, approval)
    token = fake.buttons(message)["Reject"]["value"]

    forge(fake, ALICE, message, blocks.APPROVE, token)
    status, body = fake.submit(ALICE, {"callback_id": blocks.CONFIRM_VIEW, "private_metadata": token}, {"confirmation": "DELETE"})

    assert fake.ephemerals(ALICE)[-1].startswith("This message showed the call cut") and not fake.views()
    assert status == 200 and json.loads(body)["errors"]["confirmation"] == "This message showed the call cut: open it on the site to approve."
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_for_a_sentence_only_risk_the_message_carries_the_sentence_and_no_arguments_or_preview(fake, alice, agent, settings):
    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = ["medium"]
    link(fake, alice, ALICE)
    secret = "the-secret-content-of-the-file"
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'notes.txt', 'content': secret})}"))
    assert approval.risk == "medium"
    message = request_to(fake, ALICE, approval)

    everything = json.dumps(fake.sent("chat.postMessage", channel=ALICE))
    assert summarize(Approval.objects.get(pk=approval.pk)).head in fake.text_of(message) and "notes.txt" in fake.text_of(message)
    assert secret not in everything and "Arguments" not in everything and "Preview" not in everything
    assert "Slack gets the sentence only" in fake.text_of(message)
    assert list(fake.buttons(message)) == ["Reject", "Open on the site"]
    assert not SentVersion.objects.get(message__approval=approval).complete
    forge(fake, ALICE, message, blocks.APPROVE, fake.buttons(message)["Reject"]["value"])
    assert Approval.objects.get(pk=approval.pk).status == "pending"
    settings.HITL_SLACK_SENTENCE_ONLY_RISKS = []  # even were the setting changed since it was sent
    approval_services.decide(approval.pk, user=alice, approve=False, via="chat", shown_hash=approval.shown_hash)
    assert secret not in json.dumps(request_to(fake, ALICE, approval))  # the outcome never adds what it did not carry


@through_the_loop
def test_a_plan_goes_out_as_a_generic_message_with_its_sentence_and_open_in_hitl(fake, alice, agent):
    link(fake, alice, ALICE)
    approval = only_pending(start_conversation(alice, agent, "plan a tidy-up of the notes"))
    assert approval.kind == "plan"

    message = request_to(fake, ALICE, approval)

    summary = summarize(Approval.objects.get(pk=approval.pk))
    assert message is not None and summary.head in fake.text_of(message) and "Slack cannot show this request" in fake.text_of(message)
    assert list(fake.buttons(message)) == ["Open in hitl"]
    assert fake.buttons(message)["Open in hitl"]["url"] == blocks.conversation_url(approval)
    forge(fake, ALICE, message, blocks.APPROVE, SentVersion.objects.get(message__approval=approval).token)
    assert Approval.objects.get(pk=approval.pk).status == "pending"


@through_the_loop
def test_a_question_of_a_type_slack_cannot_answer_goes_out_generic(fake, alice, agent, settings):
    link(fake, alice, ALICE)
    approval, row = queued_unsent(settings, alice, agent, "ask me for a date")
    Approval.objects.filter(pk=approval.pk).update(question={**approval.question, "type": "file"})  # a type added later

    assert send(row) == outbox.Sent.SENT

    message = request_to(fake, ALICE, approval)
    assert "question: Which date?" in fake.text_of(message) and list(fake.buttons(message)) == ["Open in hitl"]


@through_the_loop
def test_a_kind_added_later_renders_generic_and_slack_takes_it(fake, alice, agent):
    approval = only_pending(start_conversation(alice, agent, "write hello to a.txt"))
    approval = Approval.objects.select_related("tool_call", "conversation__agent", "requested_by").get(pk=approval.pk)
    approval.kind = "handoff"  # not a kind yet: what a later one meets

    text, content = blocks.request(approval, "token")

    assert text and "Write a.txt" in text
    assert [e["text"]["text"] for b in content if b["type"] == "actions" for e in b["elements"]] == ["Open in hitl"]
    from slacklink import client
    assert client.post(ALICE, text, content)[1]  # the stand-in checks Block Kit's limits as Slack does


@through_the_loop
def test_a_call_that_fits_over_several_blocks_is_shown_whole_and_approvable(fake, alice, agent):
    link(fake, alice, ALICE)
    content = "\n".join(f"line {n}: " + "z" * 60 for n in range(100))  # about 7,000 characters: three blocks
    approval = only_pending(start_conversation(alice, agent, f"call write_file with {json.dumps({'path': 'big.txt', 'content': content})}"))
    message = request_to(fake, ALICE, approval)

    details = "\n".join(b["elements"][0]["elements"][0]["text"] for b in message["blocks"] if b["type"] == "rich_text")
    assert len([b for b in message["blocks"] if b["type"] == "rich_text"]) >= 3
    assert details.replace("\n", "") == summarize(Approval.objects.get(pk=approval.pk)).details.replace("\n", "")
    fake.press(ALICE, message, "Approve")
    assert Approval.objects.get(pk=approval.pk).status == "approved"


def test_details_are_split_in_pieces_slack_takes_and_nothing_is_lost():
    text = "a" * 2899 + "😀" + "b\n" * 3000 + "c" * 5000
    pieces = blocks._pieces(text, blocks.MAX_DETAIL)
    assert all(blocks._units(piece) <= blocks.MAX_DETAIL for piece in pieces)
    assert "".join(pieces).replace("\n", "") == text.replace("\n", "")
