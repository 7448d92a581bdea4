"""ListTasks: the most recently updated first, paged in SQL by a cursor (a task that moves shows
once, a foreign or stale page token is invalid params), filtered by state and status time, the
artifacts only when asked."""
from datetime import UTC, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from a2a.types import a2a_pb2 as pb
from agentlink import handler
from agentlink.models import Task
from chat.models import ApiToken, Conversation
from tests.agentlink.a2a_client import State, a2a_task, rpc, send, sent

pytestmark = pytest.mark.django_db(transaction=True)  # real commits: the loop runs on them (eager Celery)


def many_finished_tasks(user, agent, count: int) -> Conversation:
    """`count` completed tasks in one conversation, written straight to the table (fast)."""
    conversation = Conversation.objects.create(owner=user, agent=agent)
    Task.objects.bulk_create(
        Task(conversation=conversation, position=n, end_position=n + 1, final_state=Task.FinalState.COMPLETED)
        for n in range(1, count + 1)
    )
    return conversation


def test_list_tasks_filtered_by_state_pages_in_the_database_past_the_newest_500(alice, agent, django_assert_max_num_queries):
    paused = a2a_task(alice, agent, "write hello to a.txt")  # the oldest task: 600 newer ones follow
    many_finished_tasks(alice, agent, 600)
    token = ApiToken.issue(alice)

    waiting = rpc(token, "ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"})["result"]
    pages, following = [], ""
    while following or not pages:
        page = rpc(token, "ListTasks", {"status": "TASK_STATE_COMPLETED", "pageSize": 100, "pageToken": following})["result"]
        pages.append(page)
        following = page.get("nextPageToken", "")

    assert [t["id"] for t in waiting["tasks"]] == [str(paused.pk)] and waiting["totalSize"] == 1
    assert [len(page["tasks"]) for page in pages] == [100] * 6 and {page["totalSize"] for page in pages} == {600}
    assert len({t["id"] for page in pages for t in page["tasks"]}) == 600  # each once
    with django_assert_max_num_queries(40):  # the page's reads, not the 600 tasks'
        handler._list_tasks(pb.ListTasksRequest(status=State.TASK_STATE_INPUT_REQUIRED), alice, agent)
    first, last = (pb.ListTasksRequest(status=State.TASK_STATE_COMPLETED, page_size=100, page_token=page_token)
                   for page_token in ("", pages[-2]["nextPageToken"]))
    with CaptureQueriesContext(connection) as on_first:
        handler._list_tasks(first, alice, agent)
    with CaptureQueriesContext(connection) as on_last:
        handler._list_tasks(last, alice, agent)
    assert len(on_last) == len(on_first)  # a cursor, not an offset: the last page costs what the first does
    assert not any("OFFSET" in query["sql"] for query in on_last.captured_queries)


def test_list_tasks_filtered_by_status_time_keeps_the_tasks_that_moved_since(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    moved = Conversation.objects.get(pk=task.conversation_id).updated_at
    token = ApiToken.issue(alice)

    def listed(after) -> list[str]:
        stamp = after.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return [t["id"] for t in rpc(token, "ListTasks", {"statusTimestampAfter": stamp})["result"].get("tasks", [])]

    assert listed(moved - timedelta(seconds=1)) == [str(task.pk)]
    assert listed(moved) == [str(task.pk)]  # at or after: "greater than or equal to", as the specification says
    assert listed(moved + timedelta(microseconds=1)) == []


def test_a_page_token_past_any_page_is_invalid_params_not_a_database_error(alice, agent):
    a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)

    for page_token in (str(2**70), str(2**63), "-1", "x"):
        for params in ({"pageToken": page_token}, {"pageToken": page_token, "status": "TASK_STATE_INPUT_REQUIRED"}):
            error = rpc(token, "ListTasks", params)["error"]
            assert (error["code"], error["message"]) == (-32602, "pageToken is the nextPageToken of an earlier page."), params


def test_negative_page_sizes_and_history_lengths_and_unknown_states_are_invalid_params(alice, agent):
    task = a2a_task(alice, agent, "write hello to a.txt")
    token = ApiToken.issue(alice)
    refused = [
        rpc(token, "ListTasks", {"pageSize": -1}),
        rpc(token, "ListTasks", {"historyLength": -2}),
        rpc(token, "ListTasks", {"status": 99}),
        rpc(token, "GetTask", {"id": str(task.pk), "historyLength": -1}),
    ]
    assert [answer.get("error", {}).get("code") for answer in refused] == [-32602] * 4, refused
    assert rpc(token, "ListTasks", {"pageSize": 0})["result"]["tasks"]  # 0: the default size


def listed_ids(token: str, **params) -> list[str]:
    return [task["id"] for task in rpc(token, "ListTasks", params)["result"].get("tasks", [])]


def stamp(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def status_time(task: Task):
    return sent(Task.objects.get(pk=task.pk)).status.timestamp.ToDatetime(tzinfo=UTC)


def test_list_tasks_puts_the_most_recently_updated_task_first_not_the_newest(alice, agent):
    paused = a2a_task(alice, agent, "write hello to a.txt")
    later = a2a_task(alice, agent, "what is 2 + 2")
    token = ApiToken.issue(alice)
    assert listed_ids(token) == [str(later.pk), str(paused.pk)]

    send(paused, alice, {"decision_type": "approve"})  # the older task moves: it completes now

    assert listed_ids(token) == [str(paused.pk), str(later.pk)]
    assert status_time(paused) > status_time(later)


def test_a_task_that_moves_between_two_pages_is_not_shown_twice_and_shifts_no_other(alice, agent):
    oldest = a2a_task(alice, agent, "write hello to a.txt")
    b, c, d, e = (a2a_task(alice, agent, f"what is {n} + {n}") for n in (2, 3, 4, 5))
    token = ApiToken.issue(alice)
    first = rpc(token, "ListTasks", {"pageSize": 2})["result"]

    send(oldest, alice, {"decision_type": "approve"})  # an offset would now show d again and never c
    second = rpc(token, "ListTasks", {"pageSize": 2, "pageToken": first["nextPageToken"]})["result"]

    assert [t["id"] for t in first["tasks"]] == [str(e.pk), str(d.pk)]
    assert [t["id"] for t in second["tasks"]] == [str(c.pk), str(b.pk)]
    assert (second["totalSize"], second.get("nextPageToken", "")) == (5, "")  # the moved task is ahead of the cursor now
    assert listed_ids(token, pageSize=2) == [str(oldest.pk), str(e.pk)]  # and first in a listing from the top


def test_a_page_token_not_given_for_this_listing_is_invalid_params(alice, mallory, agent):
    for n in (2, 3, 4):
        a2a_task(alice, agent, f"what is {n} + {n}")
        a2a_task(mallory, agent, f"what is {n} + {n}")
    alices, mallorys = ApiToken.issue(alice), ApiToken.issue(mallory)
    page_token = rpc(alices, "ListTasks", {"pageSize": 1})["result"]["nextPageToken"]
    assert page_token and not page_token.isdigit()  # a position, not an offset

    foreign = [
        rpc(mallorys, "ListTasks", {"pageSize": 1, "pageToken": page_token}),  # another user's
        rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": page_token, "status": "TASK_STATE_COMPLETED"}),  # another filter's
        rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": page_token[:-2] + ("AA" if page_token[-2:] != "AA" else "BB")}),
        rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": "1"}),  # the old offsets
    ]

    assert [(answer["error"]["code"], answer["error"]["message"]) for answer in foreign] == [
        (-32602, "pageToken is the nextPageToken of an earlier page.")] * 4
    assert len(rpc(alices, "ListTasks", {"pageSize": 1, "pageToken": page_token})["result"]["tasks"]) == 1


def test_a_task_over_keeps_its_status_time_and_the_time_filter_reads_that_at_or_after(alice, agent):
    closed = a2a_task(alice, agent, "what is 3 + 3")
    settled = status_time(closed)
    current = a2a_task(alice, agent, "what is 4 + 4", conversation=Conversation.objects.get(pk=closed.conversation_id))
    token = ApiToken.issue(alice)

    assert Task.objects.get(pk=closed.pk).final_state == Task.FinalState.COMPLETED
    assert status_time(closed) == settled < Conversation.objects.get(pk=closed.conversation_id).updated_at
    assert listed_ids(token, statusTimestampAfter=stamp(settled)) == [str(current.pk), str(closed.pk)]  # at: included
    assert listed_ids(token, statusTimestampAfter=stamp(settled + timedelta(microseconds=1))) == [str(current.pk)]
    assert rpc(token, "ListTasks", {})["result"]["tasks"][1]["status"]["timestamp"] == stamp(settled)


def test_list_tasks_leaves_out_the_artifacts_unless_asked(alice, agent):
    a2a_task(alice, agent, "what is 2 + 2")
    token = ApiToken.issue(alice)

    [bare] = rpc(token, "ListTasks", {})["result"]["tasks"]
    [full] = rpc(token, "ListTasks", {"includeArtifacts": True})["result"]["tasks"]

    assert "artifacts" not in bare
    assert [artifact["name"] for artifact in full["artifacts"]][-1] == "answer"
