"""A2A under load, end to end: one user's heavy A2A reads must not stall anyone else's A2A call or
the dashboard's websocket (A2A's database work has threads of its own, and a filtered ListTasks
pages in SQL). The real `a2a-sdk` client against daphne; the 500 tasks are written straight to the
database."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from websockets.sync.client import connect

from a2a.types import a2a_pb2 as pb
from agentlink.models import Task
from chat.models import Conversation, Message
from tests.conftest import wait_until
from tests.e2e.a2a_client import A2A, State
from tests.e2e.chat.test_api_e2e import session_headers

pytestmark = pytest.mark.e2e

TASKS, PER_CONVERSATION, READERS = 500, 20, 6


def five_hundred_finished_tasks(user, agent) -> None:
    """TASKS completed turns (a question and an answer each), in conversations of PER_CONVERSATION."""
    conversations = Conversation.objects.bulk_create(
        Conversation(owner=user, agent=agent, title=f"load {n}") for n in range(TASKS // PER_CONVERSATION)
    )
    messages, tasks = [], []
    for conversation in conversations:
        for turn in range(PER_CONVERSATION):
            asked = 2 * turn + 1
            messages += [
                Message(conversation=conversation, position=asked, role=Message.Role.USER, content=f"what is {turn} + 1", author=user),
                Message(conversation=conversation, position=asked + 1, role=Message.Role.ASSISTANT, content=f"It is {turn + 1}."),
            ]
            last = turn == PER_CONVERSATION - 1  # the open task reads completed from its rows
            tasks.append(Task(conversation=conversation, position=asked, end_position=None if last else asked + 2,
                              final_state="" if last else Task.FinalState.COMPLETED))
    Message.objects.bulk_create(messages)
    Task.objects.bulk_create(tasks)


def test_six_heavy_list_tasks_leave_a_bystanders_get_task_fast_and_the_dashboard_socket_connecting(e2e, alice, bob, mallory, agent):
    bystander = A2A(e2e.base_url, mallory)
    paused = bystander.task("write hello to a.txt")
    assert paused.status.state == State.TASK_STATE_INPUT_REQUIRED
    five_hundred_finished_tasks(alice, agent)
    readers = [A2A(e2e.base_url, alice) for _ in range(READERS)]  # one token each: no per-token cap helps here
    assert readers[0].list(status=State.TASK_STATE_COMPLETED, page_size=1).total_size == TASKS

    stop, pages, lists = threading.Event(), [0] * READERS, []
    in_flight = [[] for _ in range(READERS)]  # per reader: (began, ended) of each ListTasks

    def read_everything(n: int) -> None:
        """Page through every completed task, again and again, until told to stop."""
        token = ""
        while not stop.is_set():
            began = time.monotonic()
            page = readers[n].list(status=State.TASK_STATE_COMPLETED, page_size=100, page_token=token)
            ended = time.monotonic()
            in_flight[n].append((began, ended))
            lists.append(round(ended - began, 3))
            pages[n] += 1
            token = page.next_page_token

    def load_during(start: float, end: float) -> float:
        """The share of the window [start, end] in which the readers had a ListTasks in flight, all readers
        together (1.0: every reader was waiting on the server the whole time). A page can take longer than
        the whole measure on a busy machine, so pages finished is no measure of load; time in flight is."""
        covered = sum(max(0.0, min(ended, end) - max(began, start)) for spans in in_flight for began, ended in spans)
        return covered / (READERS * (end - start))

    gets, sockets = [], []
    with ThreadPoolExecutor(READERS) as pool:
        load = [pool.submit(read_everything, n) for n in range(READERS)]
        try:
            wait_until(lambda: all(pages), timeout=60, message=f"every reader to get a page (pages {pages})")
            measure_began = time.monotonic()
            for _ in range(5):
                task, took = bystander.timed_get(paused.id)
                assert task.status.state == State.TASK_STATE_INPUT_REQUIRED
                gets.append(round(took, 3))
                began = time.monotonic()
                with connect(f"{e2e.ws_url}/ws/approvals/", origin=e2e.base_url, additional_headers=session_headers(bob),
                             open_timeout=5) as socket:
                    sockets.append(round(time.monotonic() - began, 3))
                    with pytest.raises(TimeoutError):
                        socket.recv(timeout=0.2)  # accepted and left open: not closed on the approver
            measure_ended = time.monotonic()
        finally:
            stop.set()
            for reader in load:
                reader.result(timeout=60)
    load_share = load_during(measure_began, measure_ended)

    seen = f"GetTask {gets} s; socket handshakes {sockets} s; ListTasks {sorted(lists)[-10:]} s (slowest of {len(lists)}); ListTasks in flight {load_share:.0%} of the measure"
    print(seen)
    assert load_share >= 0.9, f"the load was not on throughout the measure: {seen}"
    assert max(gets) < 1.0, f"a bystander's GetTask took over 1 s: {seen}"
    assert len(sockets) == 5 and max(sockets) < 1.0, f"the dashboard socket was slow to connect: {seen}"
