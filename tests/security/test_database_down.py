"""A database that is down for a moment (restarting, out of connections) is a 503 with
Retry-After that says so, on the pages and the JSON API, never a 500 (issue 36; the fault matrix,
tests/e2e/faults/test_faults.py, restarts a real PostgreSQL)."""
import pytest
from django.db import OperationalError

from core.middleware import DATABASE_UNAVAILABLE
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


def refuse(*args, **kwargs):
    raise OperationalError("server closed the connection unexpectedly")


def test_the_api_answers_503_with_retry_after_when_the_database_is_down(alice, api_as, monkeypatch):
    api = api_as(alice)
    monkeypatch.setattr("approvals.api.visible_approvals", refuse)

    response = api.get("approvals")

    assert response.status_code == 503
    assert response.json() == {"detail": DATABASE_UNAVAILABLE}
    assert response["Retry-After"] == "5"


def test_a_page_answers_503_with_a_page_that_says_to_try_again(alice, monkeypatch):
    client = client_for(alice)
    monkeypatch.setattr("chat.views.recent_conversations", refuse)

    response = client.get("/")

    assert response.status_code == 503 and response["Retry-After"] == "5"
    page = response.content.decode()
    assert "<h1>Try again in a moment</h1>" in page and "Nothing was lost" in page
