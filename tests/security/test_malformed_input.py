"""Finding 8: malformed input gets a clear 4xx (API: JSON) or an error result for the model, never a
500 and never a failed conversation."""
import json

import pytest

from chat.models import Agent, Conversation, ToolCall
from tests.conftest import client_for, pending_approvals, start_conversation as start
from tests.standins.fake_openai import fake_openai  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HX-Request": "true"}
BAD_IDS = ["²", "9" * 25, "9" * 5000]


@pytest.fixture
def remote_agent(fake_openai, settings, tmp_path):
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    return Agent.objects.create(open_to_everyone=True,
        slug="remote", name="Remote", model="openai/gpt-4o-mini", api_base=fake_openai.base_url,
        tools=["read_file", "write_file"], require_approval=["write_file"],
    )


@pytest.mark.parametrize("bad", BAD_IDS)
def test_approve_all_on_the_page_refuses_ids_that_are_not_ids(alice, agent, bad):
    conversation = start(alice, agent, "delete a.txt and b.txt")

    response = client_for(alice).post(f"/conversations/{conversation.pk}/approve-all/", {"approval_ids": [bad]}, headers=HTMX)

    assert response.status_code == 400 and "is not an id" in response.content.decode()
    assert len(pending_approvals(conversation)) == 2


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_dashboard_bulk_decision_refuses_ids_that_are_not_ids(alice, bob, agent, bad):
    conversation = start(alice, agent, "delete a.txt")

    response = client_for(bob).post("/approvals/bulk/", {"approval_ids": [bad], "decision": "approve"}, headers=HTMX)

    assert response.status_code == 400
    assert len(pending_approvals(conversation)) == 1


@pytest.mark.parametrize("older_than", ["9999999999", "²", "-5", "1e3"])
def test_the_dashboard_ignores_an_age_filter_it_cannot_read(bob, older_than):
    assert client_for(bob).get("/approvals/", {"older_than": older_than}).status_code == 200


def test_a_lone_surrogate_in_a_message_is_a_clear_json_400(alice, agent, api_as):
    body = '{"agent": "demo", "message": "hi \\ud800 there"}'
    response = api_as(alice).client.post("/api/conversations", body, content_type="application/json", headers=api_as(alice).headers)

    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    assert "surrogate" in response.json()["detail"]
    assert not Conversation.objects.exists()


def test_a_body_over_the_limit_is_a_json_413(alice, agent, api_as, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    api = api_as(alice)

    response = api.client.post(
        "/api/conversations", json.dumps({"agent": "demo", "message": "x" * 2000}), content_type="application/json", headers=api.headers
    )

    assert response.status_code == 413 and response.json() == {"detail": "The request body is too large."}


def test_a_lone_surrogate_in_model_text_does_not_fail_the_conversation(alice, remote_agent, fake_openai):
    fake_openai.respond_with_text("broken \ud800 text")

    conversation = start(alice, remote_agent, "hello")

    assert conversation.status == Conversation.Status.IDLE
    assert conversation.messages.last().content == "broken \ufffd text"


def test_call_ids_a_provider_repeats_stay_unique(alice, remote_agent, fake_openai):
    fake_openai.respond_with_tool_calls(
        [("read_file", {"path": "a"}, "x_2"), ("read_file", {"path": "b"}, "x"), ("read_file", {"path": "c"}, "x")]
    )
    fake_openai.respond_with_text("done")

    conversation = start(alice, remote_agent, "read three")

    assert conversation.status == Conversation.Status.IDLE
    assert sorted(ToolCall.objects.values_list("call_id", flat=True)) == ["x", "x_2", "x_2_2"]


def test_deeply_nested_arguments_are_an_error_result_not_a_crash(alice, remote_agent, fake_openai):
    fake_openai.respond_with_tool_calls([("read_file", "[" * 50000)])
    fake_openai.respond_with_text("ok")

    conversation = start(alice, remote_agent, "nest")

    call = ToolCall.objects.get()
    assert call.status == ToolCall.Status.FAILED and "nested too deeply" in call.error
    assert conversation.status == Conversation.Status.IDLE


def test_an_over_long_call_id_is_stored_cut_to_the_column(alice, remote_agent, fake_openai):
    fake_openai.respond_with_tool_calls([("read_file", {"path": "a"}, "c" * 500)])
    fake_openai.respond_with_text("ok")

    conversation = start(alice, remote_agent, "long id")

    assert conversation.status == Conversation.Status.IDLE
    assert ToolCall.objects.get().call_id == "c" * 200


def test_lone_surrogates_in_model_arguments_are_an_error_result(alice, remote_agent, fake_openai):
    fake_openai.respond_with_tool_calls([("read_file", '{"path": "a\\ud800"}')])
    fake_openai.respond_with_text("ok")

    conversation = start(alice, remote_agent, "surrogate")

    call = ToolCall.objects.get()
    assert call.status == ToolCall.Status.FAILED and "surrogate" in call.error
    assert conversation.status == Conversation.Status.IDLE


def test_a_nul_in_an_agent_or_tool_name_is_a_clear_400_or_unknown(alice, agent, api_as):
    api = api_as(alice)

    listed = api.get("approvals", agent="de\x00mo")
    started = api.post("conversations", {"agent": "de\x00mo", "message": "hi"})

    assert listed.status_code == 400 and "NUL" in listed.json()["detail"]
    assert started.status_code == 400 and started.json()["detail"].startswith("Unknown agent")
