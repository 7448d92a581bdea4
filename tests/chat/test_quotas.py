"""Quotas are atomic (issue 22): concurrent requests of one user are counted one after another, so
no burst gets past a limit; through the JSON API, with real threads and the real database."""
import threading

import pytest
from django.db import connection
from django.db.transaction import TransactionManagementError

from chat import quotas
from chat.models import Conversation
from tests.conftest import ApiClient, start_conversation

pytestmark = pytest.mark.django_db(transaction=True)


def burst(clients: list[ApiClient], path: str, body: dict) -> list[int]:
    """Every client posts at once (a barrier lets them go together); their status codes."""
    codes, barrier = [], threading.Barrier(len(clients))

    def post(client):
        try:
            barrier.wait(timeout=30)
            codes.append(client.post(path, body).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    return codes


def test_sixty_concurrent_starts_with_a_limit_of_twenty_start_twenty(alice, agent, settings):
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = 20
    clients = [ApiClient(alice) for _ in range(60)]

    codes = burst(clients, "conversations", {"agent": agent.slug, "message": "hello"})

    assert sorted(codes) == [201] * 20 + [429] * 40
    assert Conversation.objects.filter(owner=alice).count() == 20


def test_concurrent_messages_past_the_quota_are_refused_and_not_stored(alice, agent, settings):
    conversation = start_conversation(alice, agent, "hello")  # one message of the minute's quota
    settings.HITL_QUOTA_MESSAGES_PER_MINUTE = 6
    clients = [ApiClient(alice) for _ in range(20)]

    codes = burst(clients, f"conversations/{conversation.pk}/messages", {"content": "hello again"})

    assert sorted(codes) == [202] * 5 + [429] * 15
    assert conversation.messages.filter(author=alice).count() == 6


def test_a_quota_checked_outside_the_transaction_that_stores_is_refused(alice, settings):
    settings.HITL_QUOTA_CONVERSATIONS_PER_HOUR = 1
    with pytest.raises(TransactionManagementError):
        quotas.check_conversation(alice)
