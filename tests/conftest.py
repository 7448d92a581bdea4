"""Named users (alice owns, bob approves, mallory is neither), the demo agent, small factories."""
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.test import Client

from approvals.models import Approval
from bench.stack import wait_until  # noqa: F401  (one polling helper for the tests and the bench)
from chat import services
from chat.demo import ensure_demo_agent
from chat.models import ApiToken, Conversation
from tests import emptying

emptying.install()


@pytest.fixture(autouse=True)
def empty_cache():
    """Each test starts with an empty process cache: what it remembers is keyed by row ids (A2A push's
    last state sent per config), and a rolled-back test's ids are given out again to the next."""
    cache.clear()


@pytest.fixture
def alice(db):
    return User.objects.create_user("alice", password="alice-password")


@pytest.fixture
def bob(db):
    user = User.objects.create_user("bob", password="bob-password")
    user.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    return User.objects.get(pk=user.pk)  # fresh, so the permission cache is empty


@pytest.fixture
def mallory(db):
    return User.objects.create_user("mallory", password="mallory-password")


@pytest.fixture
def agent(db, settings, tmp_path):
    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    return ensure_demo_agent()


@pytest.fixture
def gated_deploy(agent):
    """The demo agent, gating `deploy` too: a tool it does not have, as outside agents ask for."""
    agent.require_approval = [*agent.require_approval, "deploy"]
    agent.save()
    return agent


@pytest.fixture
def make_conversation(agent):
    def make(owner, **fields) -> Conversation:
        return Conversation.objects.create(owner=owner, agent=fields.pop("agent", agent), **fields)

    return make


class ApiClient:
    """Calls the JSON API with a bearer token, as a program would."""

    def __init__(self, user, *, scope: str = ApiToken.Scope.DECIDE):
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {ApiToken.issue(user, scope=scope)}"} if user else {}

    def get(self, path: str, **params):
        return self.client.get(f"/api/{path}", params, headers=self.headers)

    def post(self, path: str, body=None):
        data = json.dumps(body) if body is not None else ""
        return self.client.post(f"/api/{path}", data, content_type="application/json", headers=self.headers)

    def patch(self, path: str, body):
        return self.client.patch(f"/api/{path}", json.dumps(body), content_type="application/json", headers=self.headers)

    def delete(self, path: str):
        return self.client.delete(f"/api/{path}", headers=self.headers)


@pytest.fixture
def api_as():
    return ApiClient


def start_conversation(user, agent, text: str) -> Conversation:
    """Start a conversation as `user` would (the loop runs in-process with eager Celery), refreshed."""
    conversation = services.start_conversation(user=user, agent=agent, content=text)
    conversation.refresh_from_db()
    return conversation


def client_for(user, *, csrf: bool = False) -> Client:
    """A logged-in test client; `csrf=True` enforces CSRF tokens as a browser's requests meet them."""
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def pending_approvals(conversation) -> list[Approval]:
    return list(Approval.objects.filter(conversation=conversation, status=Approval.Status.PENDING).order_by("pk"))


@pytest.fixture
def ops_agent(db, settings, tmp_path):
    from chat.demo import ensure_ops_agent

    settings.HITL_SANDBOX_ROOT = tmp_path / "sandboxes"
    return ensure_ops_agent()


@pytest.fixture
def carol(db):
    """A second approver, in the Approvers group made by the data migration."""
    from approvals.permissions import approvers_group

    user = User.objects.create_user("carol", password="carol-password")
    user.groups.add(approvers_group())
    return User.objects.get(pk=user.pk)
