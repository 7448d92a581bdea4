"""File answers (issue 39, item 6; the Swift design's InputType.file): a question of type "file"
with `accept` and `max_bytes` (capped by HITL_MAX_UPLOAD_BYTES) is answered on its card by an
upload, stored in the conversation's sandbox; the model reads the stored path and size. A wrong
type or size is refused with the reason and the question stays open; every other surface says
"answer on the site"."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from approvals.models import Approval
from approvals.pauses import questions
from approvals.services import InvalidAnswer, answer
from chat.models import ToolCall
from chat.scripted import SCRIPTED_REQUESTS
from telegramlink import texts as telegram_texts
from tests.conftest import client_for, only_pending, say, start_conversation as start

pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HX-Request": "true"}


def upload(client, approval: Approval, name: str, content: bytes, content_type: str = "text/csv"):
    return client.post(
        f"/approvals/{approval.pk}/answer/",
        {"shown_hash": approval.shown_hash, "file": SimpleUploadedFile(name, content, content_type=content_type)},
        headers=HX,
    )


def test_a_csv_file_is_uploaded_on_the_card_stored_in_the_sandbox_and_read_by_the_model(alice, agent, settings):
    conversation = start(alice, agent, "ask me for a csv file of at most 100 bytes")
    question = only_pending(conversation)
    assert question.question | {} == {**question.question, "type": "file", "accept": [".csv"], "max_bytes": 100}
    page = client_for(alice).get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'type="file" name="file" accept=".csv"' in page and 'enctype="multipart/form-data"' in page
    assert "A file (.csv), at most 100" in page
    SCRIPTED_REQUESTS.clear()

    response = upload(client_for(alice), question, "../../Q3 report.csv", b"a,b\n1,2\n")

    assert response.status_code == 200, response.content
    question.refresh_from_db()
    assert question.status == "answered"
    assert question.answer == {"path": "uploads/Q3_report.csv", "size": 8, "name": "Q3_report.csv", "content_type": "text/csv"}
    stored = settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "uploads" / "Q3_report.csv"
    assert stored.read_bytes() == b"a,b\n1,2\n"
    told = next(m["content"] for m in SCRIPTED_REQUESTS[0]["messages"] if m["role"] == "tool")
    assert json.loads(told.split("\n", 1)[0]) == {"answer": question.answer}
    assert told.endswith("The human answered: Q3_report.csv (8 bytes), stored as uploads/Q3_report.csv.")

    say(conversation, alice, "read uploads/Q3_report.csv")  # the agent's own tools find it
    read = ToolCall.objects.filter(message__conversation=conversation, name="read_file").get()
    assert (read.status, read.result) == (ToolCall.Status.SUCCEEDED, "a,b\n1,2\n")


@pytest.mark.parametrize("name, content, refused", [
    ("notes.txt", b"hello", "notes.txt is not a type this question takes: .csv."),
    ("big.csv", b"x" * 101, "The file is 101 bytes; this question takes files of at most 100 bytes."),
])
def test_a_wrong_type_or_size_is_refused_with_the_reason_and_the_question_stays_open(alice, agent, settings, name, content, refused):
    conversation = start(alice, agent, "ask me for a csv file of at most 100 bytes")
    question = only_pending(conversation)

    response = upload(client_for(alice), question, name, content)

    assert refused in response.content.decode()
    question.refresh_from_db()
    assert question.status == "pending"
    assert not any((settings.HITL_SANDBOX_ROOT / str(conversation.pk)).glob("uploads/*"))


def test_a_question_max_bytes_is_capped_by_the_setting(settings):
    asked = questions.normalize({"question": "Which?", "type": "file", "max_bytes": 10**12}, most_file_bytes=5000)
    assert asked["max_bytes"] == 5000 and asked["accept"] == []
    with pytest.raises(questions.InvalidQuestion, match="accept"):
        questions.normalize({"question": "Which?", "type": "file", "accept": ["not a type"]})
    with pytest.raises(questions.InvalidQuestion, match="only a file question"):
        questions.normalize({"question": "Which?", "type": "text", "accept": [".csv"]})
    assert questions.accepts({"accept": ["image/*"]}, "cat.png", "image/png")
    assert not questions.accepts({"accept": ["image/*"]}, "cat.png.exe", "application/octet-stream")


def test_two_uploads_of_one_name_never_share_a_file(alice, agent, settings):
    first = only_pending(start(alice, agent, "ask me for a file"))
    upload(client_for(alice), first, "a.csv", b"one")
    conversation = first.conversation
    say(conversation, alice, "ask me for a file")
    second = only_pending(conversation)
    upload(client_for(alice), second, "a.csv", b"two")

    second.refresh_from_db()
    assert second.answer["path"] == "uploads/a-2.csv"
    assert (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "uploads" / "a.csv").read_bytes() == b"one"


def test_every_other_surface_says_answer_on_the_site(alice, agent, api_as):
    conversation = start(alice, agent, "ask me for a file")
    question = only_pending(conversation)

    response = api_as(alice).post(f"approvals/{question.pk}/answer", {"answer": {"path": "uploads/x", "size": 1}, "shown_hash": question.shown_hash})
    assert response.status_code == 400 and response.json()["detail"] == questions.ON_THE_SITE
    with pytest.raises(InvalidAnswer, match="upload it on its card"):
        answer(question.pk, user=alice, via="text", shown_hash=question.shown_hash, value="here it is")
    item = api_as(alice).get(f"approvals/{question.pk}").json()
    assert (item["question"]["type"], item["question"]["accept"], item["question"]["max_bytes"]) == ("file", [], 10 * 1024 * 1024)
    assert "Telegram cannot answer a file question: open it in hitl to answer it." in telegram_texts.request(question).text
    question.refresh_from_db()
    assert question.status == "pending"


def test_a_stored_file_answers_only_the_question_it_was_uploaded_for(alice, agent):
    question = only_pending(start(alice, agent, "ask me for a file"))
    other = questions.StoredFile(approval_id=question.pk + 1000, path="uploads/x", size=1, name="x", content_type="text/plain")
    with pytest.raises(InvalidAnswer, match="another question"):
        answer(question.pk, user=alice, via="chat", shown_hash=question.shown_hash, value=other)


def test_an_uploads_folder_the_agent_replaced_with_a_file_or_a_link_stores_nothing_and_says_why(alice, agent, settings, tmp_path):
    conversation = start(alice, agent, "ask me for a file")
    question = only_pending(conversation)
    sandbox = settings.HITL_SANDBOX_ROOT / str(conversation.pk)
    sandbox.mkdir(parents=True, exist_ok=True)
    (sandbox / "uploads").write_text("not a folder")

    refused = upload(client_for(alice), question, "a.csv", b"x")
    assert "hold a file named uploads" in refused.content.decode()

    (sandbox / "uploads").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (sandbox / "uploads").symlink_to(elsewhere)
    refused = upload(client_for(alice), question, "a.csv", b"x")
    assert "a link out of its files" in refused.content.decode() and not list(elsewhere.iterdir())
    question.refresh_from_db()
    assert question.status == "pending"


def test_someone_who_may_not_answer_stores_nothing(alice, mallory, agent, settings):
    conversation = start(alice, agent, "ask me for a file")
    question = only_pending(conversation)

    refused = upload(client_for(mallory), question, "a.csv", b"x")

    assert refused.status_code == 404
    assert not (settings.HITL_SANDBOX_ROOT / str(conversation.pk) / "uploads").exists()
