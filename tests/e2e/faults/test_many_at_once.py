"""Many people at once, with a model that takes seconds: the worker, as the Procfile starts it,
overlaps the model calls of many conversations, so twenty people who write at the same moment are
all answered in about one model latency, not twenty (the benchmark in bench/ carries the real
figures; the bound here is generous so the test is not flaky on a loaded machine)."""
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.model_server import ModelServer
from chat.models import Agent, Conversation, Message
from tests.conftest import wait_until
from tests.e2e.conftest import Api

pytestmark = pytest.mark.e2e
PEOPLE = 20
LATENCY = 1.0


@pytest.fixture
def slow_model():
    server = ModelServer(latency=LATENCY, tokens_per_second=40).start()
    yield server
    server.stop()


def test_twenty_conversations_on_a_one_second_model_are_all_answered_in_under_five_seconds(e2e, alice, slow_model):
    Agent.objects.create(open_to_everyone=True, slug="slow", name="Slow", model="openai/gpt-4o-mini", api_base=slow_model.base_url)
    api = Api(e2e.base_url, alice)

    started = time.monotonic()
    with ThreadPoolExecutor(PEOPLE) as people:
        responses = list(people.map(lambda n: api.post("conversations", {"agent": "slow", "message": f"hello {n}"}), range(PEOPLE)))
    assert [r.status_code for r in responses] == [201] * PEOPLE
    ids = [r.json()["id"] for r in responses]
    answered = Conversation.objects.filter(pk__in=ids, status=Conversation.Status.IDLE, messages__role=Message.Role.ASSISTANT)
    wait_until(lambda: answered.distinct().count() == PEOPLE, timeout=60, message="every conversation answered")
    elapsed = time.monotonic() - started

    assert elapsed < 5.0, f"{PEOPLE} conversations on a {LATENCY:g} s model took {elapsed:.1f} s"
    assert slow_model.peak_in_flight >= PEOPLE // 2  # the model calls overlapped
    assert slow_model.requests == PEOPLE  # one model call each, none repeated
    assert Message.objects.filter(conversation_id__in=ids, role=Message.Role.ASSISTANT).count() == PEOPLE
