"""chat.llm.complete() through real litellm: the offline scripted provider, and litellm's OpenAI
provider against a local fake of the OpenAI API (tests/standins/fake_openai.py), alone and inside the loop."""
import json

import pytest
from django.contrib.auth.models import User

from approvals.models import Approval
from approvals.services import decide
from chat import llm, services
from chat.llm import LLMError, ModelToolCall, complete
from chat.models import Agent, Conversation, Message
from chat.tools import registry
from tests.standins.fake_openai import fake_openai  # noqa: F401  (the fixture)

OPENAI_MODEL = "openai/gpt-4o-mini"

# complete() turns off the OpenAI SDK's own retries (max_retries=0), so one attempt is one request.
REQUESTS_PER_ATTEMPT = 1


@pytest.fixture(autouse=True)
def fast_llm(settings):
    settings.HITL_LLM_TIMEOUT = 1
    settings.HITL_LLM_RETRIES = 2
    settings.HITL_LLM_RETRY_BACKOFF = 0.01


def ask(text: str, **kwargs):
    return complete(messages=[{"role": "user", "content": text}], **kwargs)


def ask_fake(server, text: str = "hello", tools: list[dict] | None = None, **kwargs):
    return ask(text, model=OPENAI_MODEL, api_base=server.base_url, tools=tools or [], **kwargs)


# --- The scripted provider ----------------------------------------------------------------------


def test_scripted_model_turns_a_delete_request_into_two_tool_calls():
    turn = ask("delete a.txt and b.txt", model="scripted/demo", tools=[registry.get("delete_file").openai_schema()])

    assert [(c.name, json.loads(c.raw_arguments)) for c in turn.tool_calls] == [
        ("delete_file", {"path": "a.txt"}),
        ("delete_file", {"path": "b.txt"}),
    ]
    assert len({c.call_id for c in turn.tool_calls}) == 2


def test_mcp_is_installed_for_litellm():
    # litellm needs `mcp` for some completion paths; none of the calls here happens to import it.
    from mcp import ClientSession, types

    assert ClientSession and types.Tool


def test_scripted_model_answers_a_greeting_with_text():
    turn = ask("hello", model="scripted/demo", tools=[])

    assert turn.tool_calls == []
    assert "scripted model" in turn.text


# --- litellm's OpenAI provider against the fake server ------------------------------------------


def test_streamed_text_arrives_through_on_delta(fake_openai):
    fake_openai.respond_with_text("Hello there, world.")
    deltas = []

    turn = ask_fake(fake_openai, on_delta=deltas.append)

    assert deltas == ["Hello ", "there, ", "world."]
    assert turn.text == "Hello there, world."
    assert turn.tool_calls == []


def test_streamed_tool_calls_are_assembled_into_whole_calls(fake_openai):
    fake_openai.respond_with_tool_calls(
        [
            ("delete_file", {"path": "a.txt"}, "call_first"),
            ("delete_file", {"path": "some/longer/name b.txt"}, "call_second"),
        ]
    )

    turn = ask_fake(fake_openai, "delete a.txt and b.txt")

    assert turn.tool_calls == [
        ModelToolCall(call_id="call_first", name="delete_file", raw_arguments='{"path": "a.txt"}'),
        ModelToolCall(call_id="call_second", name="delete_file", raw_arguments='{"path": "some/longer/name b.txt"}'),
    ]


def test_the_request_carries_the_messages_and_the_tools(fake_openai):
    fake_openai.respond_with_text("Sure.")
    tools = [registry.get("delete_file").openai_schema()]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "delete a.txt"},
    ]

    complete(model=OPENAI_MODEL, api_base=fake_openai.base_url, messages=messages, tools=tools)

    [request] = fake_openai.requests
    assert request["model"] == "gpt-4o-mini"
    assert request["stream"] is True
    assert request["messages"] == messages
    assert request["tools"] == tools


class Interrupted(Exception):
    pass


@pytest.mark.parametrize("interrupt", [False, True], ids=["read to the end", "left mid-stream"])
def test_a_stream_read_or_left_has_no_finalizer_left_to_set_context_variables(fake_openai, monkeypatch, interrupt):
    """litellm's stream wrapper sets ContextVars in __del__; finalized by the cyclic GC in the middle
    of another ContextVar.set, that is a use-after-free before Python 3.12 (a segfault in a test
    run). complete() disarms it whether the stream was read to the end or left by an exception."""
    import litellm

    streams = []
    real_completion = litellm.completion
    monkeypatch.setattr(litellm, "completion", lambda **kwargs: streams.append(real_completion(**kwargs)) or streams[-1])
    fake_openai.respond_with_text("Hello there, world.")

    def on_delta(text):
        if interrupt:
            raise Interrupted

    if interrupt:
        with pytest.raises(LLMError):
            ask_fake(fake_openai, on_delta=on_delta)
    else:
        ask_fake(fake_openai, on_delta=on_delta)

    assert len(streams) == 1
    assert streams[0].logging_obj is None


def test_complete_retries_a_failing_provider_until_it_answers(fake_openai, settings):
    settings.HITL_LLM_RETRIES = 3
    # Enough 500s to make one whole complete() attempt fail, so complete()'s own retry must act.
    fake_openai.respond_with_status(500, times=REQUESTS_PER_ATTEMPT)
    fake_openai.respond_with_text("Back again.")
    restarts = []

    turn = ask_fake(fake_openai, on_restart=lambda: restarts.append(1))

    assert turn.text == "Back again."
    assert restarts
    assert fake_openai.unanswered == 0


def test_a_rate_limit_on_every_attempt_raises_a_readable_error(fake_openai, settings):
    settings.HITL_LLM_RETRIES = 1
    fake_openai.respond_with_status(429, times=2 * REQUESTS_PER_ATTEMPT)

    with pytest.raises(LLMError, match="rate-limiting") as caught:
        ask_fake(fake_openai)

    assert "Try again" in str(caught.value)


def test_a_model_that_hangs_past_the_timeout_raises_a_readable_error(fake_openai, settings):
    settings.HITL_LLM_RETRIES = 0
    settings.HITL_LLM_TIMEOUT = 0.5
    fake_openai.respond_with_hang(30, times=REQUESTS_PER_ATTEMPT)

    with pytest.raises(LLMError, match=r"did not answer within 0\.5 s"):
        ask_fake(fake_openai)


def test_an_openai_compatible_stream_is_read_without_litellms_wrapper(fake_openai, monkeypatch):
    """The thin path (issue 24): the provider's chunks are read as they come; litellm's wrapper,
    which rebuilds every chunk and the whole response at the end, is not iterated."""
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    def wrapper_used(self):
        raise AssertionError("litellm's stream wrapper was iterated")

    monkeypatch.setattr(CustomStreamWrapper, "__next__", wrapper_used)
    fake_openai.respond_with_tool_calls([("delete_file", {"path": "a.txt"})], text="Deleting.")
    deltas = []

    turn = ask_fake(fake_openai, on_delta=deltas.append)

    assert (turn.text, "".join(deltas)) == ("Deleting.", "Deleting.")
    assert [(call.name, json.loads(call.raw_arguments)) for call in turn.tool_calls] == [("delete_file", {"path": "a.txt"})]


@pytest.mark.parametrize("path", ["the provider's chunks", "litellm's wrapper"])
def test_an_error_mid_stream_restarts_the_answer_and_the_retry_answers(fake_openai, monkeypatch, path):
    """Either way of reading a stream treats a failure after the answer began alike: the shown part
    is taken back (on_restart) and the call retried."""
    if path == "litellm's wrapper":
        monkeypatch.setattr(llm, "_openai_stream_class", lambda: type("NoStreamIsThis", (), {}))
    fake_openai.respond_with_error_mid_stream(["Half ", "an "])
    fake_openai.respond_with_text("A whole answer.")
    deltas, restarts = [], []

    turn = ask_fake(fake_openai, on_delta=deltas.append, on_restart=lambda: restarts.append(len(deltas)))

    assert turn.text == "A whole answer."
    assert restarts == [2]  # after "Half " and "an " were shown
    assert len(fake_openai.requests) == 2


def test_an_error_raised_by_on_delta_is_not_taken_for_the_providers(fake_openai):
    """A failure of ours while the answer streams (say, the database) is not retried as if the
    provider had failed: it ends the call as it is."""
    fake_openai.respond_with_text("Hello there, world.")
    fake_openai.respond_with_text("Never asked for.")

    def on_delta(text):
        raise KeyError("ours")

    with pytest.raises(LLMError, match="KeyError"):
        ask_fake(fake_openai, on_delta=on_delta)
    assert len(fake_openai.requests) == 1


# --- The loop through the OpenAI provider -------------------------------------------------------


def make_openai_agent(server, **fields) -> Agent:
    defaults = dict(
        slug="fake-openai",
        name="Fake OpenAI",
        model=OPENAI_MODEL,
        api_base=server.base_url,
        tools=["delete_file"],
        require_approval=["delete_file"],
        open_to_everyone=True,
    )
    return Agent.objects.create(**(defaults | fields))


def last_assistant_text(conversation: Conversation) -> str:
    return conversation.messages.filter(role=Message.Role.ASSISTANT).order_by("position").last().content


def test_a_rejected_call_reaches_the_model_as_its_tool_result(fake_openai, transactional_db):
    alice = User.objects.create_user("alice", password="pw")
    agent = make_openai_agent(fake_openai)
    [call_id] = fake_openai.respond_with_tool_calls([("delete_file", {"path": "a.txt"})])
    fake_openai.respond_with_text("All right, I kept a.txt.")

    conversation = services.start_conversation(user=alice, agent=agent, content="delete a.txt")

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.WAITING_FOR_APPROVAL
    approval = Approval.objects.get(conversation=conversation)
    assert approval.status == Approval.Status.PENDING
    assert approval.tool_call.call_id == call_id

    decide(approval.pk, user=alice, approve=False, via=Approval.Via.API, reason="keep it", shown_hash="")

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert last_assistant_text(conversation) == "All right, I kept a.txt."
    first, second = fake_openai.requests
    sent = second["messages"]
    turn_index = next(i for i, m in enumerate(sent) if m["role"] == "assistant")
    assert [c["id"] for c in sent[turn_index]["tool_calls"]] == [call_id]
    # kagent's nudge after the reason (issue 39, item 11): not the same call again
    assert sent[turn_index + 1] == {
        "role": "tool", "tool_call_id": call_id,
        "content": "Rejected by alice: keep it\n\nThis call was rejected and did not run. Please try a different approach.",
    }
    assert approval.tool_call.__class__.objects.get(pk=approval.tool_call_id).result == "Rejected by alice: keep it"  # the card's words


def test_a_failing_model_fails_the_conversation_and_retry_recovers_it(fake_openai, transactional_db, settings):
    settings.HITL_LLM_RETRIES = 1
    alice = User.objects.create_user("alice", password="pw")
    agent = make_openai_agent(fake_openai)
    fake_openai.respond_with_status(500, times=2 * REQUESTS_PER_ATTEMPT)

    conversation = services.start_conversation(user=alice, agent=agent, content="hello")

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.FAILED
    assert conversation.error == "The model provider had an internal error (tried 2 times)."
    assert not conversation.messages.filter(role=Message.Role.ASSISTANT).exists()

    fake_openai.clear()
    fake_openai.respond_with_text("Hello! How can I help?")
    services.retry(conversation=conversation, user=alice)

    conversation.refresh_from_db()
    assert conversation.status == Conversation.Status.IDLE
    assert conversation.error == ""
    assert last_assistant_text(conversation) == "Hello! How can I help?"
